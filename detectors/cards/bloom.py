"""Compromised cards: the cards seen at a terminal while it was compromised, as a Bloom filter.

When the compromised-terminal rule (`detectors.cards.terminal`) fires on a window, the cards
job builds a Bloom filter of the cards seen at that terminal in that window with Spark's
`bloom_filter_agg` and publishes it (`cards.compromised-cards`). The fraud endpoint loads the
filters and sends those cards' next card-not-present purchases to review: the fraud-DB lookup
of Dunning ch. 6, in constant memory per terminal window, and with no card number in it.

What goes in: `token_key(card_token)`, a long (Spark's `bloom_filter_agg` takes longs only):
the first 15 hex digits of the token's HMAC (60 bits), never the PAN. The same in Spark:
`conv(substring(card_token, 5, 15), 16, 10)` cast to long (`TOKEN_KEY_SQL`).

`SparkBloomFilter` reads, queries and builds Spark's `org.apache.spark.util.sketch.BloomFilter`
bit for bit, both versions of its format (big-endian, `DataOutputStream`):
- V1 (`BloomFilterImpl`): int version=1, int numHashFunctions, then the bit array;
- V2 (`BloomFilterImplV2`, what `BloomFilter.create` makes in Spark 4): int version=2,
  int numHashFunctions, int seed, then the bit array;
- the bit array (`BitArray`): int number of longs, then each long; the filter's size in bits is
  64 x the longs (`numBits` rounded up to whole longs). Bit i is bit (i mod 64) of long i / 64.
Hashing of a long item: h1 = Murmur3_x86_32.hashLong(item, seed), h2 = hashLong(item, h1).
V1 probes i = 1..k at `h1 + i * h2` (32-bit int arithmetic); V2 at the running 64-bit sum
`h1 * Integer.MAX_VALUE + i * h2` (as Spark 4.2's `BloomFilterImplV2.scatterHashAndSetAllBits`
has it: the sum is not flipped in place); a negative probe is bit-flipped (`~`), then taken
modulo the bit size. The number of hash functions is Spark's
`BloomFilter.optimalNumOfHashFunctions(n, m)`, the bits for a false-positive probability
`optimalNumOfBits(n, fpp)`.

    >>> f = SparkBloomFilter.create(expected_items=100, fpp=0.01)
    >>> f.put_long(token_key("tok_00000000000000a3f0c9")); f.might_contain_long(0xA3)
    False
    >>> f.might_contain_token("tok_00000000000000a3f0c9")
    True
    >>> SparkBloomFilter.from_bytes(f.to_bytes()) == f
    True
"""

from __future__ import annotations

import base64
import math
import struct
from typing import Literal

from pydantic import Field

from detectors.cards.devices import DEVICE_GATE_HELP, DeviceGate
from detectors.params import Thresholds

RULE = "compromised_card"
#: A purchase by a card seen at a compromised terminal is that fraud's follow-on.
LABEL = "compromised_terminal"
#: The prefix of a card token (`core.pan.TOKEN_PREFIX`; detectors import only the contracts).
TOKEN_PREFIX = "tok_"
KEY_HEX_DIGITS = 15
#: `token_key` in Spark SQL.
TOKEN_KEY_SQL = (
    f"cast(conv(substring(card_token, {len(TOKEN_PREFIX) + 1}, {KEY_HEX_DIGITS}), 16, 10) "
    "as bigint)"
)

Channel = Literal["card_present", "card_not_present", "online"]


class CompromisedCardParams(Thresholds):
    """The Bloom filter of a compromised terminal's cards and what the endpoint does with it,
    set once here for the cards job (which builds the filters) and the fraud endpoint (which
    applies them). Design choices, not tuned on any split, but `devices` (the tuning split)."""

    fpp: float = Field(
        0.01,
        gt=0,
        lt=1,
        description="False-positive probability each filter is sized for at `expected_items` "
        "cards (a card never seen at the terminal found in its filter).",
    )
    expected_items: int = Field(
        1000,
        ge=1,
        le=4_000_000,
        description="Cards a filter is sized for (9,585 bits, 1.2 KiB, at 1,000 and 0.01); "
        "a window with fewer cards has a lower false-positive rate, one with more a higher.",
    )
    apply_s: float = Field(
        86_400.0,
        gt=0,
        description="A filter applies to purchases this long after its window ends.",
    )
    channels: tuple[Channel, ...] = Field(
        ("card_not_present", "online"),
        min_length=1,
        description="The channels of the purchases a filter sends to review: a skimmed card "
        "is cashed out where no card is shown.",
    )
    devices: DeviceGate = Field(
        "new",
        description=f"{DEVICE_GATE_HELP} Set on the cards-tuning split's cash-out runs, as the "
        "gate with the fewest legitimate reviews per cash-out purchase it adds to review "
        "(any 16.8, not_known 2.7, new 0.44; docs/sketches.md).",
    )

    @property
    def num_bits(self) -> int:
        return optimal_num_bits(self.expected_items, self.fpp)


def token_key(token: str) -> int:
    """The long a card token is put in a filter as (`TOKEN_KEY_SQL` in Spark).

    >>> token_key("tok_000000000000010ffff")
    16
    """
    digits = token[len(TOKEN_PREFIX) :] if token.startswith(TOKEN_PREFIX) else token
    return int(digits[:KEY_HEX_DIGITS], 16)


def optimal_num_bits(expected_items: int, fpp: float) -> int:
    """Spark's `BloomFilter.optimalNumOfBits(n, p)`.

    >>> optimal_num_bits(1000, 0.01)
    9585
    """
    return int(-expected_items * math.log(fpp) / (math.log(2) * math.log(2)))


def optimal_num_hashes(expected_items: int, num_bits: int) -> int:
    """Spark's `BloomFilter.optimalNumOfHashFunctions(n, m)` (Java's `Math.round`)."""
    return max(1, math.floor(num_bits / expected_items * math.log(2) + 0.5))


_MASK32 = 0xFFFFFFFF
_MASK64 = 0xFFFFFFFFFFFFFFFF
_C1, _C2 = 0xCC9E2D51, 0x1B873593
_INT_MAX = 2**31 - 1


def _int32(x: int) -> int:
    x &= _MASK32
    return x - (1 << 32) if x & 0x80000000 else x


def _int64(x: int) -> int:
    x &= _MASK64
    return x - (1 << 64) if x & (1 << 63) else x


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _mix_k1(k1: int) -> int:
    return (_rotl32((k1 * _C1) & _MASK32, 15) * _C2) & _MASK32


def _mix_h1(h1: int, k1: int) -> int:
    return (_rotl32(h1 ^ k1, 13) * 5 + 0xE6546B64) & _MASK32


def _fmix(h1: int, length: int) -> int:
    h1 ^= length
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK32
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK32
    h1 ^= h1 >> 16
    return h1


def murmur3_hash_long(item: int, seed: int) -> int:
    """Spark's `Murmur3_x86_32.hashLong(long, int)`, as a signed int.

    >>> murmur3_hash_long(0, 0), murmur3_hash_long(-1, 42)
    (1669671676, -939490007)
    """
    item &= _MASK64
    h1 = _mix_h1(seed & _MASK32, _mix_k1(item & _MASK32))
    h1 = _mix_h1(h1, _mix_k1(item >> 32))
    return _int32(_fmix(h1, 8))


class SparkBloomFilter:
    """Spark's Bloom filter (see the module docstring for the format and hashing)."""

    __slots__ = ("bits", "num_hashes", "seed", "version")

    def __init__(self, version: int, num_hashes: int, bits: bytearray, seed: int = 0) -> None:
        if version not in (1, 2):
            raise ValueError(f"unknown Bloom filter version {version}")
        if num_hashes < 1 or not bits or len(bits) % 8:
            raise ValueError("a Bloom filter needs hash functions and whole longs of bits")
        self.version = version
        self.num_hashes = num_hashes
        self.seed = seed
        self.bits = bits  # the longs big-endian, as serialized

    @classmethod
    def create(
        cls, expected_items: int, fpp: float | None = None, num_bits: int | None = None
    ) -> SparkBloomFilter:
        """An empty filter as `BloomFilter.create(n, fpp)` / `create(n, numBits)` makes it
        (V2, seed 0)."""
        if num_bits is None:
            num_bits = optimal_num_bits(expected_items, 0.03 if fpp is None else fpp)
        words = -(-num_bits // 64)
        return cls(2, optimal_num_hashes(expected_items, num_bits), bytearray(8 * words))

    @classmethod
    def from_bytes(cls, data: bytes) -> SparkBloomFilter:
        """Deserialize `BloomFilter.writeTo`'s bytes (ValueError when they are not that)."""
        if len(data) < 12:
            raise ValueError("too short for a Bloom filter")
        version, num_hashes = struct.unpack_from(">ii", data, 0)
        offset, seed = 8, 0
        if version == 2:
            (seed,) = struct.unpack_from(">i", data, offset)
            offset += 4
        elif version != 1:
            raise ValueError(f"unknown Bloom filter version {version}")
        (words,) = struct.unpack_from(">i", data, offset)
        offset += 4
        if words <= 0 or len(data) != offset + 8 * words:
            raise ValueError("the bit array's length does not match the bytes")
        return cls(version, num_hashes, bytearray(data[offset:]), seed)

    @classmethod
    def from_base64(cls, text: str) -> SparkBloomFilter:
        """From base64 text; line breaks are ignored (Spark's `base64` may chunk its output
        into MIME lines, `spark.sql.chunkBase64String.enabled`)."""
        return cls.from_bytes(base64.b64decode("".join(text.split()), validate=True))

    def to_bytes(self) -> bytes:
        head = struct.pack(">ii", self.version, self.num_hashes)
        if self.version == 2:
            head += struct.pack(">i", self.seed)
        return head + struct.pack(">i", len(self.bits) // 8) + bytes(self.bits)

    def to_base64(self) -> str:
        return base64.b64encode(self.to_bytes()).decode("ascii")

    @property
    def bit_size(self) -> int:
        return 8 * len(self.bits)

    def cardinality(self) -> int:
        """Bits set."""
        return sum(b.bit_count() for b in self.bits)

    def expected_fpp(self) -> float:
        """Spark's `expectedFpp()`: (bits set / bits) ** k, the false-positive probability of
        the filter as filled."""
        return float((self.cardinality() / self.bit_size) ** self.num_hashes)

    def _indexes(self, item: int) -> list[int]:
        h1 = murmur3_hash_long(item, self.seed)
        h2 = murmur3_hash_long(item, h1)
        size = self.bit_size
        out = []
        if self.version == 1:
            for i in range(1, self.num_hashes + 1):
                combined = _int32(h1 + i * h2)
                if combined < 0:
                    combined = ~combined
                out.append(combined % size)
        else:
            combined = _int64(h1 * _INT_MAX)
            for _ in range(self.num_hashes):
                combined = _int64(combined + h2)
                out.append((~combined if combined < 0 else combined) % size)
        return out

    def _locate(self, index: int) -> tuple[int, int]:
        """(byte in `bits`, mask) of bit `index`: bit index % 64 of the big-endian long
        index // 64."""
        word, bit = divmod(index, 64)
        return 8 * word + 7 - bit // 8, 1 << (bit % 8)

    def put_long(self, item: int) -> None:
        for index in self._indexes(item):
            byte, mask = self._locate(index)
            self.bits[byte] |= mask

    def might_contain_long(self, item: int) -> bool:
        for index in self._indexes(item):
            byte, mask = self._locate(index)
            if not self.bits[byte] & mask:
                return False
        return True

    def put_token(self, token: str) -> None:
        self.put_long(token_key(token))

    def might_contain_token(self, token: str) -> bool:
        return self.might_contain_long(token_key(token))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SparkBloomFilter) and (
            self.version,
            self.num_hashes,
            self.seed,
            self.bits,
        ) == (other.version, other.num_hashes, other.seed, other.bits)

    def __hash__(self) -> int:
        return hash((self.version, self.num_hashes, self.seed, bytes(self.bits)))

    def __repr__(self) -> str:
        return f"SparkBloomFilter(v{self.version}, k={self.num_hashes}, bits={self.bit_size})"
