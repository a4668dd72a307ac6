"""The broker's rules without I/O: partition logs, high watermark, ISR, fetch sessions.

:class:`~emulator.broker.replica_manager.ReplicaManager` is one broker's
state (Kafka's ``ReplicaManager`` with its ``Partition`` objects); the Ray
actor :mod:`actors.broker` drives it with its clock, its Ray calls and its
ZooKeeper writes, and does what the manager's outputs say.
"""
