"""The consumer host's core: many emulated consumers in one process, without I/O.

* :mod:`emulator.host.shell`: a member's streams, fetch positions and processing.
* :mod:`emulator.host.legacy_shell` / :mod:`emulator.host.modern_shell`: the
  shells around the 0.8 machine and the modern (classic, KIP-848) machines.
* :mod:`emulator.host.fetch_client`: one fetch session per broker for all members.
* :mod:`emulator.host.core`: the members, the tick, group-request batching,
  housekeeping; the injected transport and event sink.
* :mod:`emulator.host.faults`: what pause, slow, network partition and a
  subscription change do to a member.

The Ray actor (:mod:`actors.consumer_host`) supplies the loop, the clock, the
broker calls and the ZooKeeper sessions.
"""
