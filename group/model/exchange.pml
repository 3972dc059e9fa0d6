/* exchange.pml - the device-side push exchange (kernels/exchange/
 * exchange_push.cu) followed, on every rank and every call, by the packed
 * select (kernels/packed/select.cu), the push of a saturated rank
 * (kernels/topn/push.cu) and the rescue (kernels/packed/rescue.cu), for W
 * ranks over NCALLS consecutive calls of one row, checked with spin
 * (docs/PROTOCOL.md, "The model"; run by group/model/check.sh, ctest
 * model.exchange).
 *
 * One process per rank runs its calls in stream order. A step of the model
 * is a memory operation that another rank can observe; each names the kernel
 * line it stands for ("exchange_push.cu:L [En]": the [En] tags in that file;
 * check.sh fails when a cited line lost its tag). Data is abstracted to the
 * call number (and rank) it belongs to.
 *
 * Properties (assertions; spin also reports invalid end states: deadlock):
 *   P1 a rank whose call succeeded reads, in its gathered parity, only rows
 *      of that call (neither older nor newer), in the settle, select, rescue;
 *   P2 no store lands in a gathered parity that a rank whose call succeeded
 *      is reading;
 *   P3 a rank whose rescue succeeded reads, in each receive slot, the list
 *      of that call and that rank; no push lands in a receive slot such a
 *      rank is reading; a rescue flag is never newer than expected;
 *   P4 the exchange's protocol check ([E2], [E8]) never fires: it is a guard
 *      against misuse (a skipped call, buffers not zeroed), not a state the
 *      protocol reaches;
 *   P5 (NO_FAULTS) every rank finishes every call without a failure.
 *
 * Variants (-D on the spin command line):
 *   (none)            faults: any wait may time out (the %globaltimer bound
 *                     can expire while a peer is slow), the last rank may
 *                     stop calling before any call (a dead process)
 *   NO_DEATH          timeouts only (a smaller state space)
 *   MAX_FAULTS=k      at most k timeouts a run (with pan -E: assertions only)
 *   ALL_MASKS         any saturation mask of at most NSLOT ranks per call
 *   NCALLS=n          calls per rank (3 by default)
 *   NO_FAULTS         no timeout, no death: P5, and deadlock freedom means
 *                     something (no wait can end but by its flag)
 *   LIVENESS          with NO_FAULTS: the LTL claim "eventually every rank
 *                     finished" (acceptance run, weak fairness)
 *   SINGLE_BUFFER     one gathered buffer, one flag per rank (no parity):
 *                     must fail (P1 or P2), the reason for the double buffer
 *   NO_EMPTY_ON_FAIL  a failed exchange keeps the rank's own slot ([E10]
 *                     removed): must fail (P3), the reason for [E10]
 */

#ifndef W
#define W 3
#endif
#if W != 3
#error "the masks below are written for W = 3"
#endif
#ifndef NCALLS
#define NCALLS 3
#endif
/* Receive slots of a row, (K - 1) / N: at most NSLOT ranks are saturated. */
#define NSLOT 2

#define ST_OK 0
#define ST_TIMEOUT 15  /* DC_EXCHANGE_STATUS_TIMEOUT */
#define ST_PROTOCOL 16 /* DC_EXCHANGE_STATUS_PROTOCOL */
#define ST_RESCUE 10   /* DCPTOPK_RESCUE_TIMEOUT */

#ifdef SINGLE_BUFFER
#define PAR(n) 0
#else
#define PAR(n) ((n) % 2)
#endif

/* Flattened arrays: rank r's gathered slot (p, s) and its exchange flag
 * (p, s); rank r's receive slot k of the row and its rescue flag of rank s. */
#define G(r, p, s) ((((r) * 2) + (p)) * W + (s))
#define RV(r, k) ((r) * NSLOT + (k))
#define RF(r, s) ((r) * W + (s))
/* A pushed list, abstracted: rank s's list of call n. */
#define TAG(n, s) ((n) * W + (s) + 1)
#define BIT(m, r) (((m) >> (r)) & 1)
#define POPC_BELOW(m, r) (BIT(m, 0) * ((r) > 0) + BIT(m, 1) * ((r) > 1) + BIT(m, 2) * ((r) > 2) + BIT(m, 3) * ((r) > 3))

/* A wait may end by its bound (a timeout) while FAULT holds. MAX_FAULTS
 * (the variants that must fail, with pan -E) bounds the timeouts of a run for
 * a small state space; a rank whose peer failed then waits forever, so only
 * assertions are meaningful there. Unbounded by default. */
#if defined(NO_FAULTS)
#define FAULT false
#define TOOK_FAULT skip
#elif defined(MAX_FAULTS)
#define FAULT (faults < MAX_FAULTS)
#define TOOK_FAULT faults++
#else
#define FAULT true
#define TOOK_FAULT skip
#endif

/* Shared between ranks (peer memory): what another rank stores or reads. */
byte slot[W * 2 * W];  /* call whose rows rank r's slot (p, s) holds (0: none) */
byte flag[W * 2 * W];  /* rank r's flags [2][W] (exchange_abi.h), zeroed      */
byte recv[W * NSLOT];  /* TAG of the list in rank r's receive slot k          */
byte rflag[W * W];     /* rank r's rescue flags of the row, per pushing rank  */
/* Observers for the assertions: the intervals in which a rank reads. */
byte reading[W];       /* 1 + parity rank r reads (settle, select, rescue), 0 */
bit rreading[W];       /* rank r's rescue reads its receive slots             */
byte mask[NCALLS + 1]; /* the row's saturation mask of call n, as computed
                          from every rank's rows of call n (all ranks agree)  */
byte finished;         /* ranks that ran every call                           */
byte faults;           /* timeouts so far                                     */

/* Every rank's flag (p, s) of this rank holds n (the wait is done) / holds
 * a value the protocol cannot produce (neither n nor n - 2). */
#define ALL_FLAGS(me, p, n) (flag[G(me, p, 0)] == n && flag[G(me, p, 1)] == n && flag[G(me, p, 2)] == n)
#define ALL_FLAGS_GE(me, p, n) (flag[G(me, p, 0)] >= n && flag[G(me, p, 1)] >= n && flag[G(me, p, 2)] >= n)
#define BAD_FLAG(me, p, s, n, b) (flag[G(me, p, s)] != n && flag[G(me, p, s)] != b)
#define ANY_BAD_FLAG(me, p, n, b) (BAD_FLAG(me, p, 0, n, b) || BAD_FLAG(me, p, 1, n, b) || BAD_FLAG(me, p, 2, n, b))
/* Every rank of mask m has released rescue flag value e to this rank. */
#define RFLAG_OK(me, m, s, e) (!BIT(m, s) || rflag[RF(me, s)] == e)
#define ALL_RFLAGS(me, m, e) (RFLAG_OK(me, m, 0, e) && RFLAG_OK(me, m, 1, e) && RFLAG_OK(me, m, 2, e))
#define RFLAG_OLD(me, m, s, e) (!BIT(m, s) || rflag[RF(me, s)] <= e)

/* One rank. Its own device words (ctl->seq and ctl->status, the workspace's
 * seq[t] and status) are local variables: no other rank touches them, which
 * lets spin's partial-order reduction work. Stores into several peers, and
 * releases to several peers, are one step each: a store's effect is only
 * its value (no control flow depends on it before the release that follows
 * it), and a release earlier to some peer only enables a wait that peer may
 * still take later, so the coarser steps keep every reachable violation. */
proctype rank(byte me)
{
    byte n, p, s, k, m, before, expected;
    byte seqd, xstat, rseq, rstat; /* ctl->seq, ctl->status[0], seq[t], status */
    bit healthy;

    for (n : 1 .. NCALLS) {
#if !defined(NO_FAULTS) && !defined(NO_DEATH)
        /* A process that dies or stops calling. */
        if
        :: me == W - 1 -> goto gone
        :: true -> skip
        fi;
#endif
        atomic {
            p = PAR(n);
            before = (n >= 2 -> n - 2 : 0);
            /* exchange_push.cu:160 [E1] n = ctl->seq + 1 */
            assert(seqd == n - 1);
#ifndef SINGLE_BUFFER
            /* exchange_push.cu:166 [E2] the invariant before any store: a
             * sticky failure, a flag of parity 1 - p that is not n - 1, or
             * of parity p that is neither n - 2 nor n, stores nothing. */
            if
            :: xstat == ST_OK ->
                for (s : 0 .. W - 1) {
                    if
                    :: flag[G(me, 1 - p, s)] != n - 1 || BAD_FLAG(me, p, s, n, before) ->
                        xstat = ST_PROTOCOL
                    :: else -> skip
                    fi
                }
                s = 0;
                assert(xstat != ST_PROTOCOL) /* P4 */
            :: else -> skip
            fi
#endif
        }

        /* exchange_push.cu:197 [E3] the rows of call n into slot (p, me) of
         * every rank r */
        if
        :: xstat == ST_OK ->
            atomic {
                for (s : 0 .. W - 1) {
                    assert(reading[s] != p + 1); /* P2 */
                    slot[G(s, p, me)] = n
                }
                s = 0
            }
        :: else -> skip
        fi;

        /* exchange_push.cu:213 [E4] and exchange_push.cu:228 [E5]: the last
         * CTA's arrival orders every CTA's stores before the release (one
         * step here);
         * exchange_push.cu:234 [E7] ctl->seq = n */
        seqd = n;

        if
        :: xstat == ST_OK ->
            /* exchange_push.cu:240 [E6] st.release.sys flag (p, me) = n on
             * every rank */
            atomic {
                for (s : 0 .. W - 1) {
                    flag[G(s, p, me)] = n
                }
                s = 0
            }
            /* exchange_push.cu:247 [E8] ld.acquire.sys until every flag
             * (p, s) == n, or exchange_push.cu:265 [E9] the bound */
            if
#ifdef SINGLE_BUFFER
            :: ALL_FLAGS_GE(me, p, n) -> skip
#else
            :: ALL_FLAGS(me, p, n) -> skip
            :: ANY_BAD_FLAG(me, p, n, before) -> xstat = ST_PROTOCOL; assert(false) /* P4 */
#endif
            :: FAULT -> xstat = ST_TIMEOUT; TOOK_FAULT
            fi
        :: else -> skip
        fi;

        /* select.cu:247 (fetch_row) reads the W segments of parity p, then
         * select.cu:529 writes the saturation word: the mask every rank with
         * all rows computes, or, after a failed exchange, any mask of at
         * most NSLOT ranks (a partial view), without this rank, whose own
         * slot exchange_push.cu:280 [E10] emptied. */
        healthy = (xstat == ST_OK);
        if
        :: healthy ->
            /* From here to the end of the call this rank reads parity p (the
             * select, then the rescue's round-1 words): P2 checks every
             * store against this interval. */
            atomic {
                reading[me] = p + 1;
                for (s : 0 .. W - 1) {
                    assert(slot[G(me, p, s)] == n) /* P1 */
                }
                s = 0;
                m = mask[n]
            }
        :: else ->
#ifndef NO_EMPTY_ON_FAIL
            slot[G(me, p, me)] = 0;
#endif
            if
            :: m = 0
            :: m = 1
            :: m = 2
            :: m = 4
            :: m = 3
            :: m = 5
            :: m = 6
            fi;
#ifndef NO_EMPTY_ON_FAIL
            m = m & (((1 << W) - 1) - (1 << me))
#endif
        fi;

        /* push.cu:79 a saturated rank (its bit in the mask, push.cu:73)
         * computes its local top K (push.cu:84) and stores it into receive
         * slot popcount(mask below me) of every rank; then push.cu:91
         * fences and push.cu:98 releases flag (me, t) = seq[t] + 1
         * (push.cu:94) on every rank. */
        if
        :: BIT(m, me) ->
            atomic {
                k = POPC_BELOW(m, me);
                for (s : 0 .. W - 1) {
                    assert(!rreading[s]); /* P3 */
                    recv[RV(s, k)] = TAG(n, me)
                }
                s = 0;
                k = 0
            }
            atomic {
                for (s : 0 .. W - 1) {
                    rflag[RF(s, me)] = rseq + 1
                }
                s = 0
            }
        :: else -> skip
        fi;

        /* rescue.cu:271 the row's mask (none: rescue.cu:273 not listed) */
        if
        :: m != 0 ->
            /* rescue.cu:282 expected = seq[t] + 1; rescue.cu:296 acquire
             * loads until every saturated rank's flag has it, rescue.cu:297
             * giving up on a status, rescue.cu:301 or after the bound */
            expected = rseq + 1;
            if
            :: rstat == ST_OK && ALL_RFLAGS(me, m, expected) ->
                assert(!healthy || (RFLAG_OLD(me, m, 0, expected) && RFLAG_OLD(me, m, 1, expected) &&
                                    RFLAG_OLD(me, m, 2, expected))); /* P3: never newer */
                /* rescue.cu:324 the receive slots of the row, and rescue.cu:
                 * 333 the unsaturated ranks' round-1 words (gathered parity
                 * p, still in the reading interval: P1) */
                rreading[me] = healthy;
                atomic {
                    for (s : 0 .. W - 1) {
                        if
                        :: BIT(m, s) ->
                            assert(!healthy || recv[RV(me, POPC_BELOW(m, s))] == TAG(n, s)) /* P3 */
                        :: else ->
                            assert(!healthy || slot[G(me, p, s)] == n) /* P1 */
                        fi
                    }
                    s = 0;
                    rreading[me] = 0;
                    /* rescue.cu:337 seq[t] = expected */
                    rseq = expected
                }
            :: rstat != ST_OK -> skip
            :: FAULT && rstat == ST_OK -> rstat = ST_RESCUE; TOOK_FAULT
            fi;
            expected = 0
        :: else -> skip
        fi;
        atomic {
            reading[me] = 0; /* the call's last read of parity p */
            m = 0;
            healthy = 0
        }
    }
#ifdef NO_FAULTS
    assert(xstat == ST_OK && rstat == ST_OK); /* P5 */
#endif
    finished++;
gone:
    skip
}

init
{
    byte n, i;
    /* The row's saturation mask of each call. ALL_MASKS: any of no rank,
     * one, or two (NSLOT) of the W = 3 ranks, per call (a larger state
     * space). Else a fixed sequence that makes every rank push, reuses
     * receive slot 0 and 1 across consecutive calls with a different owner
     * (call 1: ranks 0 and 2, call 2: ranks 1 and 2, call 3: rank 0 alone,
     * call 4: none). */
    for (n : 1 .. NCALLS) {
#ifdef ALL_MASKS
        if
        :: mask[n] = 0
        :: mask[n] = 1
        :: mask[n] = 2
        :: mask[n] = 4
        :: mask[n] = 3
        :: mask[n] = 5
        :: mask[n] = 6
        fi
#else
        mask[n] = (n % 4 == 1 -> 5 : (n % 4 == 2 -> 6 : (n % 4 == 3 -> 1 : 0)))
#endif
    }
    n = 0;
    atomic {
        for (i : 0 .. W - 1) {
            run rank(i)
        }
    }
    i = 0
}

#ifdef LIVENESS
ltl every_rank_finishes { <> (finished == W) }
#endif
