"""The simulated ZooKeeper of ``--engine sim`` (issue 18 design, section 3).

Layers, bottom up:

* :mod:`zk_registry.sim.tree` -- the data layer: ``DataTree``, znodes and their
  ``Stat``, children in Java ``HashSet`` order, the write operations with
  ZooKeeper 3.8.0's validation order and errors, ephemerals per session, multi.
  Pure, synchronous and deterministic: the caller hands in every zxid and time.
* :mod:`zk_registry.sim.wire` -- one connection between a client and a member:
  two :mod:`emulator.sim.network` links (latency, FIFO, blackhole), closes that
  reach the other side in order, the request/reply/notification messages and
  their jute sizes.
* :mod:`zk_registry.sim.server` -- ``SimEnsemble``: members, leader and quorum,
  elections, sessions and their expiry buckets, per-connection watches, the
  per-session request pipeline and commits, ``expire_session``, and the
  ``ZooKeeperEnsemble`` surface the orchestrator and the timeline use.
* :mod:`zk_registry.sim.client` -- ``SimKazooClient``: kazoo 2.11.0's client
  state machine and the API subset ``ZkClient`` uses, on the loop, no threads;
  ``ZkClient(raw_factory=ensemble.raw_factory(...))`` builds it.
* :mod:`zk_registry.sim.link` -- ``SimZkLink``: the fault proxy's stand-in
  (PASS, BLACKHOLE, DOWN, added latency).

Import rule (``tests/unit/test_import_rules.py``): modules here import only the
standard library (no sockets, no threads), the core (``emulator``), this
package, ``zk_registry.proxy`` (for ``ProxyMode``), ``kazoo.exceptions``,
``kazoo.protocol.states`` and ``kazoo.handlers.threading`` (for
``KazooTimeoutError``) -- never ``KazooClient``. Nothing here reads the
machine's clock or the global random generator.
"""
