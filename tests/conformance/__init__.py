"""The ZooKeeper conformance suite (issue-18 design §3.8): scripts, runner, backends.

See ``tests/conformance/README.md``.
"""
