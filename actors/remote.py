"""The Ray actors and tasks: ``ray.remote`` over the plain actor classes and the trial body.

The classes live Ray-free in :mod:`actors.broker`, :mod:`actors.consumer_host`
and :mod:`actors.producer` (a one-process engine and the unit tests use them
as they are); this module is what starts them as Ray actors, one process each.
``num_cpus=0``: an actor holds no CPU reservation, so a run's many actors fit
on any cluster (placement is by ``[placement]``, :mod:`actors.placement`).
Ray ships each class by reference to its own module, so the wrapping here
changes neither how an actor is pickled nor its name or options. An
experiment's trial (:func:`actors.experiment.run_trial`) is a Ray task the same
way (:data:`TrialTask`), shipped by reference too.
"""

from __future__ import annotations

import ray

from actors.broker import BrokerCore
from actors.consumer_host import ConsumerHostCore
from actors.experiment import run_trial
from actors.producer import ProducerCore

__all__ = ["BrokerActor", "ConsumerHostActor", "ProducerActor", "TrialTask"]

BrokerActor = ray.remote(num_cpus=0)(BrokerCore)
"""One broker (:class:`~actors.broker.BrokerCore`) as a Ray actor."""

ConsumerHostActor = ray.remote(num_cpus=0)(ConsumerHostCore)
"""One consumer host (:class:`~actors.consumer_host.ConsumerHostCore`) as a Ray actor."""

ProducerActor = ray.remote(num_cpus=0)(ProducerCore)
"""One producer (:class:`~actors.producer.ProducerCore`) as a Ray actor."""

TrialTask = ray.remote(max_retries=0)(run_trial)
"""One experiment trial (:func:`~actors.experiment.run_trial`) as a Ray task."""
