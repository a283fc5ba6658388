"""vllm-router's consistent hash ring, in Python: FurcHash over MurmurHash64A (Facebook mcrouter's lib/fbi/hash.c, as
vllm-router's src/policies/consistent_hash.rs ports it), 160 virtual nodes per worker named "<url>:<i>", and the first
ring point at or after the key's hash (wrapping round). The same worker names give the same ring, so a lane's router
and the real one send a session to the same replica (docs/fleets.md).
It knows strings and integers, nothing of requests or replicas.
"""
import bisect

M, R, MASK = 0xC6A4A7935BD1E995, 47, (1 << 64) - 1
SEED = 4193360111
VIRTUAL_NODES = 160
FURC_SHIFT, MAX_TRIES, LARGE_MODULUS = 23, 32, (1 << 23) - 1


def murmur_hash_64a(key: bytes, seed: int) -> int:
    h = (seed ^ (len(key) * M)) & MASK
    n = len(key) // 8 * 8
    for i in range(0, n, 8):
        k = int.from_bytes(key[i:i + 8], "little") * M & MASK
        k ^= k >> R
        k = k * M & MASK
        h = (h ^ k) * M & MASK
    rest = key[n:]
    if rest:
        for i in reversed(range(len(rest))):
            h ^= rest[i] << (8 * i)
        h = h * M & MASK
    h ^= h >> R
    h = h * M & MASK
    return h ^ (h >> R)


def murmur_rehash_64a(k: int) -> int:
    h = (SEED ^ (8 * M)) & MASK
    k = k * M & MASK
    k ^= k >> R
    k = k * M & MASK
    h = (h ^ k) * M & MASK
    h ^= h >> R
    h = h * M & MASK
    return h ^ (h >> R)


def furc_hash(key: bytes, m: int) -> int:
    """A number below `m` that moves for few keys when `m` grows (hash.c's furc_hash)."""
    if m <= 1:
        return 0
    cache: list[int] = []

    def bit(idx: int) -> int:
        ord_ = idx >> 6
        while len(cache) <= ord_:
            cache.append(murmur_hash_64a(key, SEED) if not cache else murmur_rehash_64a(cache[-1]))
        return (cache[ord_] >> (idx & 0x3F)) & 1

    d = 0
    while m > (1 << d):
        d += 1
    a = d
    for _ in range(MAX_TRIES):
        while not bit(a):
            if d == 0:
                return 0
            d -= 1
            a = d
        a += FURC_SHIFT
        num = 1
        for _ in range(max(d - 1, 0)):
            num = (num << 1) | bit(a)
            a += FURC_SHIFT
        if num < m:
            return num
    return 0


def fbi_hash(key: str) -> int:
    """vllm-router's `fbi_hash`: furc_hash to 23 bits, spread over 64 by MurmurHash64A of its 4 little-endian bytes."""
    return murmur_hash_64a(furc_hash(key.encode(), LARGE_MODULUS).to_bytes(4, "little"), SEED)


class HashRing:
    def __init__(self, workers: list[str], virtual_nodes: int = VIRTUAL_NODES):
        ring = {}
        for index, url in enumerate(workers):
            for i in range(virtual_nodes):
                ring[fbi_hash(f"{url}:{i}")] = index  # a later worker's equal point replaces it, as BTreeMap.insert
        self.points = sorted(ring)
        self.owner = [ring[p] for p in self.points]

    def worker(self, key: str) -> int:
        """The index of the worker that owns `key`: the first ring point >= its hash, else the first point."""
        i = bisect.bisect_left(self.points, fbi_hash(key))
        return self.owner[i if i < len(self.points) else 0]


def hash_key(session: str | None, text: str) -> str:
    """vllm-router's routing key (hash_key.rs): a session header first ("header:x-session-id:<id>"), else the request
    text itself when short, or its hash when longer than 100 bytes."""
    if session:
        return f"header:x-session-id:{session}"
    return f"request_hash:{fbi_hash(text):016x}" if len(text.encode()) > 100 else f"request:{text}"
