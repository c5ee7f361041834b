package ugate.restores;

import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The kinds of change a restore is tried with: name -> {job A, job B}. Job A == null means the
 * savepoint comes from the other Flink release (the driver passes its path).
 */
final class Scenarios {
    private Scenarios() {}

    static final String UNKNOWN_HASH = "0123456789abcdef0123456789abcdef";
    static final Map<String, Shape[]> ALL = new LinkedHashMap<>();

    private static void add(String name, Shape a, Shape b) { ALL.put(name, new Shape[] {a, b}); }

    static {
        Shape u2 = new Shape("uids-p2");
        Shape n2 = u2.copy("no-uids-p2", s -> s.uids = false);
        Shape k2 = u2.copy("uids-but-keyed-p2", s -> s.keyedUid = false);
        Shape u3 = u2.copy("uids-p3", s -> s.parallelism = 3);
        Shape m128 = u2.copy("uids-p2-maxp128", s -> s.maxParallelism = 128);
        Shape m4 = u2.copy("uids-p2-maxp4", s -> s.maxParallelism = 4);
        Shape e2 = u2.copy("uids-p2-empty-list-op", s -> s.emptyListOp = true);

        add("identical", u2, u2);
        add("identical-no-uids", n2, n2);
        add("uid-removed", u2, u2.copy(s -> s.keyedUid = false));
        add("source-uid-removed", u2, u2.copy(s -> s.sourceUid = false));
        add("uids-added", n2, u2);
        add("chaining-disabled-uids", u2, u2.copy(s -> s.disableChaining = true));
        add("chaining-disabled-no-uids", n2, n2.copy(s -> s.disableChaining = true));
        add("parallelism-breaks-chain-no-uids", n2, n2.copy(s -> s.listsParallelism = 3));
        add("parallelism-breaks-chain-uids", u2, u2.copy(s -> s.listsParallelism = 3));
        add("rescale-up", u2, u2.copy(s -> s.parallelism = 3));
        add("rescale-down", u3, u2);
        add("rescale-down-to-1", u3, u2.copy(s -> s.parallelism = 1));
        add("rescale-keyed-only", u2, u2.copy(s -> s.keyedParallelism = 4));
        add("max-parallelism-changed", m128, u2.copy(s -> s.maxParallelism = 256));
        add("max-parallelism-derived-crossing", u2, u2.copy(s -> s.keyedParallelism = 86));
        add("parallelism-above-max-parallelism", m4, u2.copy(s -> s.keyedParallelism = 6));
        // job B sets max parallelism 4 itself: the scheduler refuses the job before any state is read
        add("parallelism-above-explicit-max-parallelism", m4, m4.copy(s -> s.keyedParallelism = 6));
        add("stateful-operator-removed", u2, u2.copy(s -> s.removeLists = true));
        add("stateful-operator-added", u2, u2.copy(s -> s.addOperator = true));
        add("map-inserted-before-uidless-keyed", k2, k2.copy(s -> s.insertMap = true));
        add("uid-hash-pins-old-id", k2, k2.copy(s -> { s.insertMap = true; s.keyedUidHash = "@A"; }));
        add("uid-hash-unknown-id-with-uid", u2, u2.copy(s -> s.keyedUidHash = UNKNOWN_HASH));
        add("uid-hash-unknown-id-no-uid", k2, k2.copy(s -> { s.insertMap = true; s.keyedUidHash = UNKNOWN_HASH; }));
        add("sources-swapped-no-uids", n2, n2.copy(s -> s.swapSources = true));
        add("stateless-operator-removed", u2, u2.copy(s -> s.removeThrottle = true));
        add("empty-state-operator-removed", e2, u2);
        add("chain-mixed-max-parallelism", u2, u2.copy(s -> s.listsMaxParallelism = 256));
        add("cross-version", null, u2);

        // Issue 8: state that restores into the wrong operator. Every stateful function reports the writers of the
        // values it got back ("values:<state>"), so the fixtures show which operator's state landed where.
        Shape srcN = new Shape("mr-sources-no-uids").copy("mr-sources-no-uids", s -> { s.uids = false; s.misroute = "sources"; });
        Shape srcU = srcN.copy("mr-sources-uids", s -> s.uids = true);
        Shape brN = srcN.copy("mr-branches-no-uids", s -> s.misroute = "branches");
        Shape chN = srcN.copy("mr-chain-no-uids", s -> s.misroute = "chain");
        Shape unN = srcN.copy("mr-union-no-uids", s -> s.misroute = "union");
        add("misroute-identical-no-uids", srcN, srcN);
        add("misroute-sources-swapped-no-uids", srcN, srcN.copy(s -> s.swapSources = true));
        add("misroute-sources-swapped-uids", srcU, srcU.copy(s -> s.swapSources = true));
        add("misroute-keyed-branches-reordered", brN, brN.copy(s -> s.swapSources = true));
        add("misroute-map-inserted-shifts-ids", chN, chN.copy(s -> s.insertMap = true));
        add("misroute-union-inputs-reordered", unN, unN.copy(s -> s.swapSources = true));
    }
}
