"""The scenario file: one workload and fault schedule, run once per protocol.

A scenario is a TOML file (read with stdlib :mod:`tomllib`) describing the
cluster, the topics, the producer load, the consumer group, Kafka configs by
their Kafka names, and a timeline of membership changes. The same scenario,
seed and timeline drive every generation under comparison, so differences
come from the protocol (architecture.md, "Data flow of one run").

Format, with every default::

    name = "quickstart"          # default: the file's stem; [A-Za-z0-9._-], <= 100 chars
    description = ""
    seed = 0                     # integer >= 0; seeds every random.Random of the run
    duration_s = 60.0            # emulated (Kafka) seconds the run lasts, 0 < x <= 7 days
    time_scale = 1.0             # wall seconds per emulated second, 0.01 <= x <= 10; an emulator
                                 # knob: < 1 runs faster than Kafka, > 1 slower (a group
                                 # too large to keep Kafka's timing on a small machine)
    kafka_version = "3.9"        # Kafka release for the classic/KIP-848 defaults (B6), >= 0.10.1

    [cluster]
    brokers = 3                  # 1 .. 1000
    zookeeper_ensemble = 1       # 1, 3 or 5 members in the embedded ensemble

    [[topics]]                   # at least one, at most 1000
    name = "events"              # required; Kafka's legal characters [a-zA-Z0-9._-], <= 249;
                                 # not "__consumer_offsets" (the brokers' own)
    partitions = 12              # required, 1 .. 50000 (200000 over all topics)
    replication_factor = 1       # 1 .. [cluster].brokers; partitions x replication_factor
                                 # <= 100000 (600000 over all topics)

    [producer]
    rate_per_s = 100.0           # messages per emulated second in total, 0 .. 1e7
    topics = [...]               # default: every topic, in file order
    partitioner = "round-robin"  # "round-robin" | "key-hash" | "explicit"
    batch_size = 50              # max messages per produce batch, 1 .. 100000
    explicit_partition = 0       # only (and then required) with partitioner = "explicit"

    [group]
    id = "<name>-group"          # [A-Za-z0-9._-], <= 249 (it is a ZooKeeper path element)
    consumers = 1                # initial members, 1 .. 100000 (joins included)
    topics = [...]               # default: every topic, in file order
    topic_pattern = "events-.*"  # instead of topics: a subscription by regex, a full match
                                 # (0.8 TopicFilter, the classic client's Pattern, KIP-848's
                                 # RE2/J from 4.0); it must compile as Java reads it, as
                                 # written and as 0.8 rewrites it (emulator.topic_regex)
    topic_filter = "whitelist"   # with topic_pattern: the 0.8 filter, "whitelist" | "blacklist"
    streams_per_consumer = 1     # the legacy numStreams, 1 .. 1000 (x members <= 200000)
    processing_ms_per_message = 1.0   # 0 .. 86400000 (a day)
    consumers_per_host = 50      # emulated consumers per host actor, 1 .. 10000, and at
                                 # most 2000 hosts: ceil(members / consumers_per_host)
    static_membership = false    # classic/consumer: group.instance.id = "<group>-<member>"
    zk_latency_ms = 0.0          # legacy: each member's one-way ZooKeeper delay, drawn from
                                 # [0, zk_latency_ms] with the seed (an emulator knob)
    assignor = "..."             # override the protocol's assignor (client or server side)
    manual_commit = "none"       # "none" | "sync" | "async": with auto-commit off, the
                                 # application commits after each processed batch (a knob)
    rebalance_listener = "none"  # "none" | "commit-on-revoke": onPartitionsRevoked commits
                                 # (classic and consumer; the 0.8 consumer has no listener)

    [kafka]                      # any key of KAFKA_CONFIG_KEYS, with its Kafka type
    "rebalance.max.retries" = 4

    [placement]                  # where the Ray actors go on a cluster (an emulator knob)
    brokers = "default"          # "default" (Ray's own choice) | "spread" (one per node
    producer = "default"         # as far as they go) | "resource:NAME" (nodes that have
    consumer_hosts = "default"   # the Ray custom resource NAME, e.g. emu_consumer) |
                                 # "node:IP" (the node with that address)

    [[timeline]]                 # any order in the file; run in time order (ties: file order);
                                 # at most 100000 entries, 1000000 planned steps
    at_s = 10.0                  # required, 0 <= at_s <= duration_s
    action = "join"              # required, one of TIMELINE_ACTIONS (below)

Each action takes its own keys (any other key is an error); durations are
emulated seconds, and everything an action sets in motion (the last join of a
burst, a restart's return, a fault's end) must happen by ``duration_s``:

* ``join``: ``count`` = 1 new members; ``interval_s``: one every
  ``interval_s`` instead of all at once (a scale-out burst).
* ``leave``, ``crash``: ``member`` = ``"c-N"`` or ``"random"`` (a live member,
  chosen with the seed); or ``count`` (+ ``interval_s``), a scale-in burst
  whose every step takes the newest live member. A crash says no goodbye:
  the group notices through session expiry.
* ``restart``: ``member`` or ``members`` (``"all"`` or ``["c-1", ...]``),
  restarted in creation order, one every ``interval_s`` (a rolling restart;
  default all at once), ``downtime_s`` = 0 between the graceful shutdown and
  the start. The member keeps its name (and its ``group.instance.id`` under
  static membership).
* ``pause``: ``member``, ``duration_s``: a process pause (a long GC); the
  member resumes where it stopped, a zombie if the group expired it meanwhile.
* ``slow``: ``member``, ``duration_s``, ``processing_ms_per_message``.
* ``network_partition``: ``member`` or ``members``, ``target`` =
  ``"zookeeper"`` | ``"coordinator"`` | ``"brokers"``, ``duration_s``.
* ``host_crash``: ``host``: a consumer host dies with every member on it.
* ``broker_crash``: ``broker``; ``restart_after_s`` adds a ``broker_restart``.
* ``broker_restart``: ``broker`` (one that is down).
* ``zk_crash``: ``zk_member`` (0-based, < ``[cluster].zookeeper_ensemble``);
  ``restart_after_s`` adds a ``zk_restart``.
* ``zk_restart``: ``zk_member`` (one that is down).
* ``zk_quorum_loss``: ``duration_s``: a majority (n // 2 + 1) of the live
  ensemble members, chosen with the seed, crash at ``at_s`` and restart
  ``duration_s`` later.
* ``add_partitions``: ``topic``, ``partitions``: the new total, larger than
  the topic's count at that time.
* ``create_topic``: ``topic`` (a name no topic has then), ``partitions``,
  ``replication_factor`` = 1 (at most the brokers up then, as
  ``AdminUtils.createTopic`` requires).
* ``delete_topic``: ``topic`` (one that exists then): marked for deletion,
  which the brokers carry out as ``delete.topic.enable`` says (false in
  0.8.2.2: nothing happens); the plan takes it as gone.
* ``subscribe``: ``topics`` (topics that exist then) or ``topic_pattern`` (+
  ``topic_filter``), ``members`` = ``"all"`` live members: a subscription
  change. Members created later subscribe as ``[group]`` says.

Members are named ``c-0``, ``c-1``, ... in creation order: the initial
``[group].consumers`` first, then each join in time order continues the
numbering. A name is never given to another member; a restarted member
keeps its own. Consumer ids built from them compare as strings, so ``c-10``
sorts before ``c-2`` in the legacy assignors (A2), as a real group's ids
would. Members live on consumer hosts by creation order: the ``i``-th member
on host ``i % n_hosts``, ``n_hosts = ceil(members / consumers_per_host)``
(:meth:`Scenario.host_of`); a member cannot start on a host crashed earlier.


The timeline is checked through time: a member named must be alive then (not
left, crashed, on a crashed host, or down in a restart), a broker or
ZooKeeper member crashed must be up and one restarted down, a topic created
must not exist then and one deleted, grown or subscribed to must.
:meth:`Scenario.action_plan` gives the expanded, seeded plan the orchestrator
runs (:class:`emulator.scenario.faults.PlannedAction`); ``random`` choices use
``random.Random(f"{seed}/timeline/{index}")``.

Every size is bounded by what one run can hold (the ``MAX_*`` constants, each with its
reason), and checked before anything proportional to it is built; a count in a
timeline entry is at most :data:`MAX_MEMBERS`, a duration at most :data:`MAX_DURATION_S`.
An ``int`` Kafka config is at most a Java int, and ``zookeeper.session.timeout.ms`` x
``time_scale`` must be a session timeout ZooKeeper grants (>= 2 ms, a Java int).

Validation raises :class:`ScenarioError` with one line that names the key,
for example ``scenario quickstart.toml: [group].consumers must be an integer
>= 1, got "four"``. Unknown keys are errors, with a did-you-mean when a known
key is close. ``timeline[i]`` and ``topics[i]`` count from 0 in file order.

Kafka configs are typed and checked against :data:`KAFKA_CONFIG_KEYS`: the
legacy consumer and 0.8.2 broker keys of kafka-protocols.md A3, and the
classic and KIP-848 keys of B6 and C6. :meth:`Scenario.kafka_config` falls back
to Kafka's default, which can depend on the generation (``protocol``) and on
other keys, as in Kafka: ``rebalance.backoff.ms`` defaults to the *configured*
``zookeeper.sync.time.ms`` (K@0.8.2.2 ``consumer/ConsumerConfig.scala``).

The package, split by job (this module is its face: import from here):

* :mod:`~emulator.scenario.limits`: the size bounds, each with its reason;
* :mod:`~emulator.scenario.model`: :class:`Scenario` and its parts;
* :mod:`~emulator.scenario.faults`: the planned actions and where they apply;
* :mod:`~emulator.scenario.plan`: the timeline expanded into the seeded plan;
* :mod:`~emulator.scenario.parse`: TOML to a validated :class:`Scenario`, with
  :mod:`~emulator.scenario.timeline` (the ``[[timeline]]`` entries) and
  :mod:`~emulator.scenario.reader` (typed reads of a table);
* :mod:`~emulator.scenario.errors`: :class:`ScenarioError` and its one-line messages.

The brokers' and the fetch path's typed settings are :mod:`emulator.settings`.

The Kafka key registry the ``[kafka]`` table is checked against is
:mod:`emulator.kafka_keys`, a leaf of the core: the config classes read their
defaults there too, and :meth:`Scenario.client_config` builds them from the scenario.
"""

from __future__ import annotations

from emulator.kafka_keys import (
    INT32_MAX,
    KAFKA_CONFIG_KEYS,
    KafkaKeySpec,
    KafkaSettings,
    KafkaValue,
)
from emulator.scenario.errors import ScenarioError
from emulator.scenario.limits import (
    MAX_BATCH_SIZE,
    MAX_BROKERS,
    MAX_CONSUMER_HOSTS,
    MAX_CONSUMER_THREADS,
    MAX_DESCRIPTION_CHARS,
    MAX_DURATION_S,
    MAX_MEMBERS,
    MAX_MEMBERS_PER_HOST,
    MAX_PARTITIONS_PER_TOPIC,
    MAX_PARTITIONS_TOTAL,
    MAX_PROCESSING_MS_PER_MESSAGE,
    MAX_RATE_PER_S,
    MAX_REPLICAS_PER_TOPIC,
    MAX_REPLICAS_TOTAL,
    MAX_STREAMS_PER_CONSUMER,
    MAX_TIME_SCALE,
    MAX_TOPICS,
    MIN_TIME_SCALE,
    ZK_MIN_SESSION_TIMEOUT_MS,
)
from emulator.scenario.model import (
    AUTO_COMMIT_KEYS,
    PLACEMENT_ROLES,
    TIMELINE_ACTIONS,
    ClientConfig,
    ClusterSpec,
    GroupSpec,
    PlacementSpec,
    ProducerSpec,
    Scenario,
    TimelineEvent,
    TopicSpec,
)
from emulator.scenario.parse import (
    ASSIGNOR_NAMES,
    PARTITIONERS,
    ZOOKEEPER_ENSEMBLE_SIZES,
    bundled_scenarios,
    load_scenario,
    parse_scenario,
    scenario_from_document,
)
from emulator.scenario.plan import (
    MAX_PLANNED_STEPS,
    MAX_TIMELINE_ENTRIES,
    MembershipChange,
    member_name,
)
from emulator.settings import BrokerSettings, FetchSettings

__all__ = [
    "ASSIGNOR_NAMES",
    "AUTO_COMMIT_KEYS",
    "INT32_MAX",
    "KAFKA_CONFIG_KEYS",
    "MAX_BATCH_SIZE",
    "MAX_BROKERS",
    "MAX_CONSUMER_HOSTS",
    "MAX_CONSUMER_THREADS",
    "MAX_DESCRIPTION_CHARS",
    "MAX_DURATION_S",
    "MAX_MEMBERS",
    "MAX_MEMBERS_PER_HOST",
    "MAX_PARTITIONS_PER_TOPIC",
    "MAX_PARTITIONS_TOTAL",
    "MAX_PLANNED_STEPS",
    "MAX_PROCESSING_MS_PER_MESSAGE",
    "MAX_RATE_PER_S",
    "MAX_REPLICAS_PER_TOPIC",
    "MAX_REPLICAS_TOTAL",
    "MAX_STREAMS_PER_CONSUMER",
    "MAX_TIMELINE_ENTRIES",
    "MAX_TIME_SCALE",
    "MAX_TOPICS",
    "MIN_TIME_SCALE",
    "PARTITIONERS",
    "PLACEMENT_ROLES",
    "TIMELINE_ACTIONS",
    "ZK_MIN_SESSION_TIMEOUT_MS",
    "ZOOKEEPER_ENSEMBLE_SIZES",
    "BrokerSettings",
    "ClientConfig",
    "ClusterSpec",
    "FetchSettings",
    "GroupSpec",
    "KafkaKeySpec",
    "KafkaSettings",
    "KafkaValue",
    "MembershipChange",
    "PlacementSpec",
    "ProducerSpec",
    "Scenario",
    "ScenarioError",
    "TimelineEvent",
    "TopicSpec",
    "bundled_scenarios",
    "load_scenario",
    "member_name",
    "parse_scenario",
    "scenario_from_document",
]
