"""State the service processes of one fleet share through Redis besides plans: demand,
credit counters, usage, admission state, replica health (:mod:`.redis_state`), kept in step
by :mod:`.sync`."""

from serving.shared.redis_state import RedisSharedState
from serving.shared.sync import SharedSync, process_id

__all__ = ["RedisSharedState", "SharedSync", "process_id"]
