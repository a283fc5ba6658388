"""The live lane chunks and fuses by default (engine.config.LIVE_OPTIONS): a joiner's prompt is prefilled in chunks
under the step's token budget, in the same forward as the running requests' decodes, and the tokens stay those of
solo generate(); its options are changed by --live-options and shown on the Live view."""
import pytest

from engine import Engine
from engine.config import LIVE_OPTIONS, live_config
from engine.live import LiveLane
from engine.request import RequestSpec
from engine.step import Forward, SlotState

from app.cli import build_parser, config_from_args
from tests.kit.reference import solo_generate
from tests.engine.test_live_lane import drive, spec, written


def joiner_steps(lane: LiveLane, first: RequestSpec, joiner: RequestSpec):
    """`first` decodes, then `joiner` arrives: the records of the steps until the joiner's first token."""
    out = {}
    lane.submit(first, lambda rec, cell: out.setdefault(first.id, []).extend(written(cell)))
    while not lane.recent or lane.recent[-1].slots[0].state is not SlotState.DECODE:  # its prefill done, it decodes
        lane.step()
    lane.submit(joiner, lambda rec, cell: out.setdefault(joiner.id, []).extend(written(cell)))
    steps = []
    while not steps or steps[-1].slots[1].token_id is None:
        steps.append(lane.step())
    while lane.has_work():
        lane.step()
        lane.notify()
    return steps, out


def assert_chunked_and_fused(steps, prompt_len: int, chunk: int):
    """Each step until the joiner's first token is one fused forward in which the first request decodes and the
    joiner's prefill advances by a chunk (from what it found in the prefix cache)."""
    cached = steps[0].slots[1].cached
    assert len(steps) == -(-(prompt_len - cached) // chunk) > 1
    for i, record in enumerate(steps):
        decoding, joining = record.slots[0], record.slots[1]
        assert record.forward is Forward.FUSED
        assert decoding.state is SlotState.DECODE and decoding.token_id is not None
        assert joining.state is SlotState.PREFILL and joining.prefill == (min(cached + (i + 1) * chunk, prompt_len), prompt_len)


def test_the_live_lane_defaults_to_a_token_budget_chunks_and_one_fused_forward():
    config = live_config(8, 512)
    assert (config.max_batch_tokens, config.chunk_size, config.fused) == (256, None, True) and config.prefix_cache
    off = live_config(8, 512, {"max_batch_tokens": None, "chunk_size": None, "fused": False})
    assert (off.max_batch_tokens, off.chunk_size, off.fused) == (None, None, False)
    assert live_config(32, 512, {"max_batch_tokens": 16}).max_batch_tokens == 32  # every running request decodes
    with pytest.raises(ValueError, match="unknown live option"):
        live_config(8, 512, {"chunk": 3})


def test_a_joiners_prefill_is_chunked_and_fused_with_the_running_decode_on_the_simulator():
    lane = LiveLane(Engine(None), slots=2)
    first = RequestSpec(id="L1", prompt="x", max_new_tokens=40, prompt_ids=(1,) * 20)
    joiner = RequestSpec(id="L2", prompt="y", max_new_tokens=4, prompt_ids=tuple(range(2, 602)))
    steps, out = joiner_steps(lane, first, joiner)
    assert_chunked_and_fused(steps, 600, 256 - 1)                # the default budget, less L1's decode token
    assert len(out["L1"]) == 40 and len(out["L2"]) == 4


def test_a_joiners_prefill_is_chunked_and_fused_and_every_token_is_solo_generates_on_the_real_model(tiny):
    lane = LiveLane(Engine(tiny), slots=2, options={"chunk_size": 8})
    first = spec(tiny, 1, "Say hi.", 16)
    joiner = spec(tiny, 2, "Name three colours and say why you like each of them.", 6)
    steps, out = joiner_steps(lane, first, joiner)
    assert_chunked_and_fused(steps, len(joiner.prompt_ids), 8)
    for s in (first, joiner):
        assert out[s.id] == solo_generate(tiny, s.prompt_ids, s.max_new_tokens)


def test_live_options_on_the_command_line_reach_the_config_and_bad_ones_are_refused(capsys):
    parser = build_parser()
    args = parser.parse_args(["--live-options", '{"chunk_size": 32, "fused": false}'])
    assert config_from_args(args, parser)["LIVE_OPTIONS"] == {"chunk_size": 32, "fused": False}
    known = "known: " + ", ".join(LIVE_OPTIONS)                   # the command line checks the lane's own names
    for bad, says in (('{"chunk": 3}', "unknown live option chunk; " + known), ('{"chunk_size": 0}', "chunk_size must be"),
                      ("[1]", "a JSON object"), ("{", "not JSON")):
        with pytest.raises(SystemExit):
            config_from_args(parser.parse_args(["--live-options", bad]), parser)
        assert says in capsys.readouterr().err


def test_the_live_snapshot_on_the_socket_and_over_http_carries_the_lanes_options(make_app, connect):
    app = make_app({"LIVE_SLOTS": 2, "LIVE_OPTIONS": {"chunk_size": 16}}, engine=Engine(None))
    assert app.test_client().get("/api/live").get_json()["ready"]  # the lane opens on the first ask
    viewer = connect(app)
    viewer.emit("watch_live")
    options = viewer.wait_for("live_snapshot", timeout=30)["options"]
    assert app.test_client().get("/api/live").get_json()["options"] == options
    assert options["slots"] == 2 and options["chunk_size"] == 16 and options["max_batch_tokens"] == 256
    assert options["fused"] is True and options["prefix_cache"] is True
    assert options["kv_blocks"] > 0 and options["kv_bytes"] > 0 and options["kv_block_size"] == 16
