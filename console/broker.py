"""The Redis broker transport: kombu's, with the one change that keeps a worker alive through a Redis restart.

Why: Celery 5.7's worker, on losing its broker connection, first ``collect()``\\ s the connection (which detaches
the transport: ``transport.client = None``) and then ``close()``\\ s it. The close reaches the Redis channel's
``QoS.restore_unacked_once()`` (the channel's first close was cut short by the broken BRPOP read), which asks for
a fresh connection pool, whose parameters are read from ``transport.client``, now ``None``: an ``AttributeError``
that is not one of the transport's connection errors, so it escapes the worker's reconnect logic and the worker
exits ("Unrecoverable error: AttributeError(\"'NoneType' object has no attribute 'hostname'\")").

What: when the transport has been detached, the restore is skipped (logged). Nothing is lost by it: the broker
that just went away could not have taken the messages back anyway; a Redis that kept its data (docker-compose.yml
runs it with ``--appendonly yes``) still holds every delivered, unacknowledged message in its ``unacked`` index,
from which a worker restores it after ``visibility_timeout``; and whatever Redis lost, the console re-sends from
the database (``console.services.queue``, the recovery sweep) long before that.
A restore at a normal shutdown, with the transport attached, runs as before.

``settings.CELERY_BROKER_TRANSPORT`` selects this transport whenever ``REDIS_URL`` is set.
"""

from __future__ import annotations

import logging
from typing import Any

from kombu.transport import redis

log = logging.getLogger(__name__)


class QoS(redis.QoS):
    def restore_unacked(self, client: Any = None) -> Any:
        if client is None and getattr(self.channel.connection, "client", None) is None:
            delivered: Any = self._delivered
            log.warning(
                "the broker connection was lost: %d unacknowledged message(s) stay in Redis's unacked index "
                "(restored after visibility_timeout; queued work is re-sent by the recovery sweep)",
                len(delivered),
            )
            delivered.clear()
            return None
        return super().restore_unacked(client)


class Channel(redis.Channel):
    QoS = QoS


class Transport(redis.Transport):
    Channel = Channel
