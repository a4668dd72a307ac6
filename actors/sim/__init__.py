"""The simulation engine (issue 18): the real engine's actors on one virtual-time loop.

``--engine sim`` runs a whole scenario in one process. The actor shells are the
real engine's (:class:`actors.broker.BrokerCore`,
:class:`actors.consumer_host.ConsumerHostCore`,
:class:`actors.producer.ProducerCore`) and the orchestrator is the real
:class:`actors.orchestrator.ProtocolRun`; the engine only supplies what Ray and
the machine supplied: an :class:`~actors.system.ActorSystem` whose actors live
on a :class:`emulator.sim.loop.SimEventLoop` and call each other over
:class:`emulator.sim.network.Network` links (:mod:`actors.sim.system`).

This package never imports Ray (a rule in ``tests/unit/test_import_rules.py``).
"""
