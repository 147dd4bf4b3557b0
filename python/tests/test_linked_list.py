"""A persistent linked list written in Python with locsim.Trace: it runs under every protocol
and crash-checks clean with and without its own structural check; a protocol defect is caught;
the same list with each insert split over two transactions keeps the prefix rule and is caught
by the structural check alone."""

import random
import struct

import pytest

import locsim

PROTOCOLS = ["baseline", "s-wal", "h-wal", "ec-wal", "loc-wal", "kiln", "loc-kiln"]
DURABLE = PROTOCOLS[1:]  # baseline makes no durability promise

# Layout: a header (head pointer, length) at 0; nodes of 32 bytes from 64: value, next, and a
# check word (value ^ MAGIC) that a node's contents must carry. Address 0 is the null pointer.
HEAD, LENGTH, FIRST, NODE = 0, 8, 64, 32
MAGIC = 0x9E3779B97F4A7C15
SLOTS = 600
SIZE = FIRST + NODE * SLOTS


def node_bytes(value, nxt):
    return struct.pack("<QQQQ", value, nxt, value ^ MAGIC, 0)


def write_list(txs, split=False, seed=7):
    """A trace of `txs` inserts at the head and pops (a pop every fourth transaction). With
    `split`, an insert is two transactions: first the link to the new node, then its contents."""
    rng = random.Random(seed)
    t = locsim.Trace(SIZE)
    free = FIRST
    done = 0
    while done < txs:
        if done % 4 == 3:
            t.begin()
            head = t.load_u64(HEAD)
            if head:
                t.store_u64(HEAD, t.load_u64(head + 8))
                t.store_u64(LENGTH, t.load_u64(LENGTH) - 1)
            t.commit()
            done += 1
            continue
        assert free + NODE <= SIZE, "out of slots"
        node, free = free, free + NODE
        value = rng.getrandbits(63)
        t.begin()
        head = t.load_u64(HEAD)
        if split:
            t.store_u64(HEAD, node)
            t.store_u64(LENGTH, t.load_u64(LENGTH) + 1)
            t.commit()
            t.begin()
            t.store(node, node_bytes(value, head))
        else:
            t.store(node, node_bytes(value, head))
            t.store_u64(HEAD, node)
            t.store_u64(LENGTH, t.load_u64(LENGTH) + 1)
        t.compute(40)
        t.commit()
        done += 1 + split
    t.close()
    return t


def verify(image):
    """The list's invariants: every node in a slot, its check word right, no cycle, the
    length in the header equal to the nodes reached."""
    head, length = struct.unpack_from("<QQ", image, HEAD)
    seen = 0
    at = head
    while at:
        if at < FIRST or at + NODE > len(image) or (at - FIRST) % NODE:
            return f"node pointer {at:#x} outside the node slots"
        value, nxt, check, _ = struct.unpack_from("<QQQQ", image, at)
        if check != value ^ MAGIC:
            return f"node {at:#x}: check word {check:#x} does not match its value {value:#x}"
        seen += 1
        if seen > SLOTS:
            return "a cycle"
        at = nxt
    if seen != length:
        return f"header length {length}, {seen} nodes reached"
    return None


@pytest.fixture(scope="module")
def whole():
    return write_list(300)


def test_the_list_runs_under_every_protocol(whole):
    df = locsim.run(trace=whole, protocols=PROTOCOLS)
    assert list(df["protocol"]) == PROTOCOLS
    assert (df["txs_committed"] == 300).all()
    assert df["workload"].iloc[0] == "trace"
    # The WAL protocols write each stored byte to the log and home (Kiln's NV-LLC holds this
    # small region whole).
    assert (df.set_index("protocol").loc[["s-wal", "h-wal", "ec-wal", "loc-wal"], "write_traffic"] > 1.0).all()
    assert verify(whole.image()) is None


@pytest.mark.parametrize("protocol", DURABLE)
def test_the_list_crash_checks_clean_with_and_without_its_verify(whole, protocol):
    calls = []

    def counted(image):
        calls.append(len(image))
        return verify(image)

    plain = locsim.crash_check(trace=whole, protocol=protocol, crashes=300)
    checked = locsim.crash_check(trace=whole, protocol=protocol, crashes=300, verify=counted)
    assert plain.violations == 0 and checked.violations == 0, (plain.first_violation, checked.first_violation)
    assert checked.crash_points == plain.crash_points > 100
    assert calls and set(calls) == {SIZE}


def test_ack_before_durable_is_caught(whole):
    r = locsim.crash_check(trace=whole, protocol="h-wal", crashes=600, inject_bug="ack-before-durable")
    assert r.violations > 0 and r.first_violation.kind == "prefix"
    assert "--inject-bug ack-before-durable" in r.first_violation.replay


@pytest.fixture(scope="module")
def split():
    t = write_list(300, split=True)
    assert verify(t.image()) is None  # whole again once every insert's second half ran
    return t


# Under LOC-WAL and LOC-Kiln no durable state of this run falls between an insert's two halves
# (a speculative group makes them durable together), so `verify` has nothing to catch there.
@pytest.mark.parametrize("protocol", ["s-wal", "h-wal", "ec-wal", "kiln"])
def test_split_inserts_pass_the_prefix_rule_and_are_caught_by_verify(split, protocol):
    plain = locsim.crash_check(trace=split, protocol=protocol, crashes=400)
    assert plain.violations == 0
    checked = locsim.crash_check(trace=split, protocol=protocol, crashes=400, verify=verify)
    assert checked.violations > 0
    assert set(checked.violations_by_kind) == {"structure"}
    v = checked.first_violation
    assert v.kind == "structure" and "check word" in v.detail and "--crash-at" in v.replay
    again = checked.replay()
    assert again.crash_points == 1 and again.first_violation.crash_cycle == v.crash_cycle
    assert again.first_violation.detail == v.detail


def test_verify_exceptions_are_raised():
    t = write_list(20)

    def broken(image):
        raise KeyError("boom")

    with pytest.raises(KeyError):
        locsim.crash_check(trace=t, protocol="h-wal", crashes=20, verify=broken)


def test_trace_writer_rejects_bad_use():
    t = locsim.Trace(64)
    with pytest.raises(ValueError, match="outside a transaction"):
        t.store_u64(0, 1)
    t.begin()
    with pytest.raises(ValueError, match="outside the region"):
        t.store(60, b"12345678")
    t.store_u64(0, 5)
    t.abort()
    assert t.load_u64(0) == 0  # the abort undid the store
    t.close()
