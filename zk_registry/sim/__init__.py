"""The simulated ZooKeeper of ``--engine sim`` (issue 18 design, section 3).

Layers, bottom up (only the first exists so far):

* :mod:`zk_registry.sim.tree` -- the data layer: ``DataTree``, znodes and their
  ``Stat``, children in Java ``HashSet`` order, the write operations with
  ZooKeeper 3.8.0's validation order and errors, ephemerals per session, multi.
  Pure, synchronous and deterministic: the caller hands in every zxid and time.

Import rule (``tests/unit/test_import_rules.py``): modules here import only the
standard library (no sockets, no threads), the core (``emulator``), this
package, ``kazoo.exceptions`` and ``kazoo.protocol.states`` -- never
``KazooClient``.
"""
