"""Regional counterfactual rules: short, checked statements of *what* to remove.

``python scripts/rules.py RUN [RUN ...] [--out DIR] [--max-depth 3] [--min-coverage 0.05]
[--top 5] [--seed 0]`` reads explanation runs and, per dataset × model, learns rules of the
form "remove the candidates that link u and v and are the latest event between their two
nodes", then checks each rule with the exact oracle on events it was not learned from.

1. **Features** (``candidate_features``, pure). Every removable candidate event ``e`` of
   every explained record (status ``ok``) of the explained event ``ε_i = (u, v, t_i)`` is
   described by ``FEATURES``: its hop distance from ``{u, v}``, whether it links ``u`` and
   ``v`` (either direction), whether it touches ``u`` / ``v``, its recency rank among the
   candidates and among the candidates between its own two nodes (0 = newest), the time gap
   ``t_i − t_e``, the smaller and larger number of events its endpoints took part in before
   ``ε_i``, and whether the explained prediction is correct (the record's ``group``). Its
   label is whether it is in the record's explanation when that explanation flips the
   prediction (``is_counterfactual``).
2. **Rules** (``learn_rules``, pure). The explained events are split in two seeded halves
   (``split_events``). On the first, a shallow decision tree — scikit-learn's
   ``DecisionTreeClassifier``, the well-kept library for this; classes
   weighted ``balanced`` because explanations hold few of the candidates — separates the
   candidates in explanations from the others. Every root-to-leaf path whose leaf predicts
   "in explanation" is a ``Rule``, a conjunction of ``Condition`` on the features;
   read as an action it says "remove every removable candidate that satisfies it". A leaf
   holds at least ``min_coverage`` × (training events) candidates, and a rule is kept only if
   it matches a candidate in at least that share of the training events (its support).
3. **Held-out check** (``check_rules``). On the other half, for each rule: *coverage* =
   share of the held-out explained events with at least one removable candidate satisfying
   it; *precision* = share of covered events where removing **all** removable candidates that
   satisfy it flips the prediction, evaluated by the **exact** oracle (never read off the
   explanations). The whole matched set is removed — that is the rule's action — and
   ``mean_removed`` reports how many events that is, so a rule that flips by removing most of
   the history is visible as such. Oracles come from a factory ``event_id -> Oracle``, so
   tests inject toy oracles; the command line builds them from each run's stream and model
   (``RunOracles``). Events are checked in stream order, all rules of an event in one
   batched call.
4. **Table** (``rules_table``): per dataset × model, the rules ordered by held-out
   precision × coverage (ties: fewer events removed, then higher training support), the best
   ``top`` of them, into ``rules.md`` and ``rules.csv``.

Runs of one dataset × model are pooled when they share the stream, the weights, ``k``,
``m_max`` and the constraints (the oracle is then the same); runs that differ in any of these
form separate tables, labelled by what differs.
"""

from cftgnn.analysis.rules.checking import (
    CHECK_COLUMNS,
    OracleFactory,
    RuleCheck,
    RunOracles,
    check_rules,
    order_rules,
)
from cftgnn.analysis.rules.features import (
    BINARY,
    DURATION,
    FEATURE_NAMES,
    FEATURES,
    candidate_features,
    feature_table,
    record_features,
    split_events,
)
from cftgnn.analysis.rules.learning import (
    Condition,
    Rule,
    event_coverage,
    learn_rules,
    tree_rules,
)
from cftgnn.analysis.rules.report import (
    HEADER,
    TABLE_COLUMNS,
    GroupResult,
    format_result,
    group_rules,
    group_runs,
    main,
    markdown,
    rules_table,
    write_results,
)
from cftgnn.runs.rundir import Run, load_run, load_run_model, run_checkpoint

__all__ = [
    "BINARY",
    "CHECK_COLUMNS",
    "DURATION",
    "FEATURES",
    "FEATURE_NAMES",
    "HEADER",
    "TABLE_COLUMNS",
    "Condition",
    "GroupResult",
    "OracleFactory",
    "Rule",
    "RuleCheck",
    "Run",
    "RunOracles",
    "candidate_features",
    "check_rules",
    "event_coverage",
    "feature_table",
    "format_result",
    "group_rules",
    "group_runs",
    "learn_rules",
    "load_run",
    "load_run_model",
    "main",
    "markdown",
    "order_rules",
    "record_features",
    "rules_table",
    "run_checkpoint",
    "split_events",
    "tree_rules",
    "write_results",
]
