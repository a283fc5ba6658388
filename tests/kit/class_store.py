"""A class store for tests of the class rules: in memory, or in Redis on a redis-server started here (stopped after)."""
from app.runs.classes import Classes


def class_store(kind: str, tmp_path, max_students: int):
    """Yield a fresh class store of `kind` ("memory" or "redis"), as a pytest fixture does."""
    if kind == "memory":
        yield Classes(grace_s=60, max_classes=4, max_students=max_students)
        return
    from app.runs.redis_classes import RedisClasses
    from app.runs.redis_link import connect_redis
    from tests.kit.scale import Deployment

    d = Deployment(tmp_path)
    d.start_redis()
    try:
        yield RedisClasses(connect_redis(d.url), grace_s=60, max_classes=4, max_students=max_students)
    finally:
        d.stop()
