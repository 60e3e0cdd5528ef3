"""``python -m autotune.sim.server --sim-profile NAME [--sim-*] <sglang.launch_server flags>``: a simulated SGLang server.

A real HTTP server process (aiohttp) with SGLang's endpoints and log lines; timings come from the performance model of
the profile (``autotune/sim/model.py``), on the engine's virtual clock (``autotune/sim/engine.py``), which the
``--sim-time-scale`` only paces; clients keep it exact with the protocol of ``autotune/core/virtual_clock.py``. Exit codes
as SGLang: 2 for a bad flag (argparse), 1 for a failed launch.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
import signal
import sys
from collections.abc import Sequence
from typing import Any

from aiohttp import web

from autotune import __version__
from autotune.core.virtual_clock import CLOCK_KIND, HOLD_PATH, RELEASE_PATH, SEND_TIME_HEADER, SUCCESSOR_HEADER
from autotune.sim.args import ServerArgs, build_parser, parse_args
from autotune.sim.config import ArgsFailure, SimConfig, resolve
from autotune.sim.engine import EngineLoop
from autotune.sim.launch_log import Logger, print_failure, run_launch, speedup_for
from autotune.sim.nodes import Rendezvous, follow, parse_addr
from autotune.sim.openai_api import chat_completions, completions, list_models
from autotune.sim.profile import ProfileError, load_profile
from autotune.sim.prometheus import render_metrics
from autotune.sim.request_parse import Generation, json_body, kv_error, max_new_within_kv, parse_generate
from autotune.sim.streaming import generate_chunk, sse, token_updates

ENGINE_KEY: web.AppKey[Any] = web.AppKey("sim_state", object)


class State:
    """Everything the handlers share: config, engine (once ready), launch time."""

    def __init__(self, cfg: SimConfig, log: Logger) -> None:
        self.cfg = cfg
        self.log = log
        self.engine: EngineLoop | None = None
        self.ready = False
        self.launch_time_s = cfg.launch.total_s

    @property
    def args(self) -> ServerArgs:
        return self.cfg.args

    def model_name(self) -> str:
        return self.args.served_model_name or self.args.model_path


def _state(request: web.Request) -> State:
    return request.app[ENGINE_KEY]


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message, "code": status}, "object": "error"}, status=status)


# ---- health and info -------------------------------------------------------------------------------------------
async def health(request: web.Request) -> web.Response:
    st = _state(request)
    return web.Response(status=200 if st.ready else 503)


def server_info(st: State) -> dict[str, Any]:
    cfg, hw = st.cfg, st.cfg.profile.hardware
    eng = st.engine
    info: dict[str, Any] = dict(st.args.public_dict())
    info.update(
        {
            "mem_fraction_static": cfg.mem_fraction_static,
            "max_running_requests": cfg.max_running_requests * cfg.dp,
            "chunked_prefill_size": cfg.chunked_prefill_size,
            "cuda_graph_max_bs": cfg.knobs.graph_max_bs,
            "speculative_algorithm": cfg.spec.algorithm if cfg.spec else None,
            "speculative_num_steps": cfg.spec.num_steps if cfg.spec else None,
            "speculative_eagle_topk": cfg.spec.topk if cfg.spec else None,
            "speculative_num_draft_tokens": cfg.spec.num_draft_tokens if cfg.spec else None,
            "max_total_num_tokens": cfg.kv_tokens,
            "version": cfg.profile.defaults.version,
            "internal_states": [
                {
                    "avg_spec_accept_length": eng.avg_accept_length if eng else None,
                    "effective_max_running_requests_per_dp": cfg.max_running_requests,
                    "last_gen_throughput": eng.counters.last_gen_throughput if eng else 0.0,
                    "memory_usage": {"weight": round(cfg.weights_gb, 2), "kvcache": round(cfg.kv_gb, 2)},
                }
                for _ in range(cfg.dp)
            ],
            "sim": {
                "simulated": True,
                "profile": cfg.profile.name,
                "time_scale": st.args.sim_time_scale,
                "clock": CLOCK_KIND,
                "now": eng.now if eng else 0.0,
                "hardware": f"{hw.gpu_count}x {hw.gpu_name}",
                "gpu_name": hw.gpu_name,
                "gpu_count": cfg.knobs.tp * cfg.dp,
                "launch_time_s": round(st.launch_time_s, 3),
                "seed": st.args.sim_seed,
                "noise": st.args.sim_noise,
                "autotune_version": __version__,
                "accept_length_expected": cfg.spec.expected_accept_length if cfg.spec else None,
            },
        }
    )
    return info


async def get_server_info(request: web.Request) -> web.Response:
    return web.json_response(server_info(_state(request)), dumps=lambda o: json.dumps(o, default=str))


async def model_info(request: web.Request) -> web.Response:
    st = _state(request)
    return web.json_response(
        {
            "model_path": st.args.model_path,
            "tokenizer_path": st.args.tokenizer_path or st.args.model_path,
            "is_generation": True,
            "preferred_sampling_params": None,
            "weight_version": "default",
            "model_type": st.cfg.profile.model.architecture,
            "architectures": [st.cfg.profile.model.name],
        }
    )


async def metrics(request: web.Request) -> web.Response:
    st = _state(request)
    return web.Response(text=render_metrics(st.cfg, st.engine, st.model_name()), content_type="text/plain")


async def flush_cache(request: web.Request) -> web.Response:
    st = _state(request)
    if st.engine is None or not st.engine.flush():
        return web.Response(status=400, text="Cache not flushed because there are pending requests.")
    return web.Response(text="Cache flushed.\nPlease check backend logs for more details.")


async def set_internal_state(request: web.Request) -> web.Response:
    """SGLang's ``/set_internal_state``: the simulator changes no setting, but a successful update (an empty one
    included) zeroes the accept-length counters, as SGLang 0.5.17 does; a setting it cannot change is refused."""
    st = _state(request)
    body = await json_body(request, st, _error)
    if isinstance(body, web.Response):
        return body
    args = body.get("server_args")
    if not isinstance(args, dict):
        return _error(400, 'the body must be {"server_args": {...}}')
    updated = not args
    if updated and st.engine is not None:
        st.engine.reset_accept_counters()
    return web.json_response([updated])  # SGLang 0.5.17: one bool per scheduler


# ---- generation --------------------------------------------------------------------------------------------------
async def generate(request: web.Request) -> web.StreamResponse:
    st = _state(request)
    body = await json_body(request, st, _error)
    if isinstance(body, web.Response):
        return body
    parsed = parse_generate(body, st.cfg.context_len)
    if isinstance(parsed, str):
        return _error(400, parsed)
    too_big = kv_error(parsed.prompt_tokens, st.cfg.kv_tokens)
    if too_big:
        return _error(400, too_big)
    return await run_request(request, st, parsed, generate_chunk)


def _send_time(request: web.Request) -> float | None | web.Response:
    """The virtual send time a protocol client put in ``X-Sim-Send-Time``; None without it; a 400 when malformed."""
    raw = request.headers.get(SEND_TIME_HEADER)
    if raw is None:
        return None
    try:
        t = float(raw)
    except ValueError:
        t = math.nan
    if not math.isfinite(t) or t < 0:
        return _error(400, f"{SEND_TIME_HEADER} must be a finite number of virtual seconds >= 0, got {raw!r}")
    return t


async def clock_hold(request: web.Request) -> web.Response:
    return await _clock_call(request, hold=True)


async def clock_release(request: web.Request) -> web.Response:
    return await _clock_call(request, hold=False)


async def _clock_call(request: web.Request, *, hold: bool) -> web.Response:
    """``POST /sim/hold`` / ``/sim/release`` with ``{"requests": n}``: announce (or withdraw) protocol requests. A hold
    may name their virtual send time ``at`` and ask ``in_flight_at``: the answer then waits until the engine has done
    everything before that time and says how many requests were in flight then."""
    st = _state(request)
    body = await json_body(request, st, _error)
    if isinstance(body, web.Response):
        return body
    n = body.get("requests")
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        return _error(400, f'the body must be {{"requests": n}} with n a non-negative integer, got {body!r}')
    times: dict[str, float | None] = {}
    for key in ("at", "in_flight_at") if hold else ():
        v = body.get(key)
        if v is not None and (isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v < math.inf):
            return _error(400, f"{key} must be a finite number of virtual seconds >= 0, got {v!r}")
        times[key] = None if v is None else float(v)
    engine = st.engine
    assert engine is not None  # json_body answered 503 otherwise
    now = engine.hold(n, times.get("at")) if hold else engine.release(n)
    answer: dict[str, float | int] = {"now": now, "expected": engine.expected}
    t = times.get("in_flight_at")
    if t is not None:
        wait = 2 * engine.hold_timeout_s  # past the engine's own wait for announced requests that do not come
        in_flight = await engine.in_flight_at(t, wait)
        if in_flight is None:
            return _error(503, f"the engine did not reach virtual time {t!r} within {wait:g} s (wall)")
        answer["in_flight"] = in_flight
    return web.json_response(answer)


async def run_request(request: web.Request, st: State, gen: Generation, build: Any) -> Any:
    """Submit to the engine; answer with one JSON object or an SSE stream of chunks built by ``build``."""
    engine = st.engine
    assert engine is not None  # callers check readiness
    vocab = st.cfg.profile.model.vocab_size
    send_time = _send_time(request)
    if isinstance(send_time, web.Response):
        return send_time
    max_new, stream = max_new_within_kv(gen.prompt_tokens, gen.max_new_tokens, st.cfg.kv_tokens), gen.stream
    successor = request.headers.get(SUCCESSOR_HEADER, "1") != "0"
    h = engine.submit(gen.prompt_tokens, max_new, send_time, successor=successor)
    interval = st.args.sim_stream_interval_ms / 1000.0
    try:
        if not stream:
            h.notify_after = float("inf")  # wake only when finished
            async for final in token_updates(h, 3600.0, max_new):
                if final:
                    break
            body = build(engine, h, True, vocab)
            text = body if isinstance(body, str) else json.dumps(body)
            return web.Response(text=text, content_type="application/json")
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        async for final in token_updates(h, interval, max(1, st.args.stream_interval)):
            await resp.write(sse(build(engine, h, final, vocab)))
            if final:
                break
        await resp.write(sse("[DONE]"))
        await resp.write_eof()
        return resp
    except (asyncio.CancelledError, ConnectionResetError):
        engine.abort(h)
        raise


async def health_generate(request: web.Request) -> web.Response:
    st = _state(request)
    if not st.ready or st.engine is None:
        return web.Response(status=503)
    h = st.engine.submit(1, 1)
    async for final in token_updates(h, 0.0, 1):
        if final:
            break
    return web.Response(status=200)


def build_app(st: State) -> web.Application:
    app = web.Application(client_max_size=64 * 2**20)
    app[ENGINE_KEY] = st
    app.router.add_get("/health", health)
    app.router.add_get("/health_generate", health_generate)
    app.router.add_get("/server_info", get_server_info)
    app.router.add_get("/get_server_info", get_server_info)
    app.router.add_get("/model_info", model_info)
    app.router.add_get("/get_model_info", model_info)
    app.router.add_get("/metrics", metrics)
    app.router.add_route("*", "/flush_cache", flush_cache)
    app.router.add_route("*", "/set_internal_state", set_internal_state)
    app.router.add_post("/generate", generate)
    app.router.add_post(HOLD_PATH, clock_hold)
    app.router.add_post(RELEASE_PATH, clock_release)
    app.router.add_post("/v1/completions", lambda r: completions(r, _state(r), run_request))
    app.router.add_post("/v1/chat/completions", lambda r: chat_completions(r, _state(r), run_request))
    app.router.add_get("/v1/models", lambda r: list_models(r, _state(r)))
    return app


# ---- process ---------------------------------------------------------------------------------------------------
async def serve(cfg: SimConfig, log: Logger) -> int:
    args = cfg.args
    st = State(cfg, log)
    # handler_cancellation: a client that disconnects cancels its handler, which aborts the request in the engine, as
    # SGLang aborts a request whose client is gone (aiohttp >= 3.9 leaves handlers running by default)
    runner = web.AppRunner(build_app(st), access_log=None, handle_signals=False, handler_cancellation=True)
    await runner.setup()
    site = web.TCPSite(runner, args.host, args.port, backlog=1024, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        log(
            f"OSError: [Errno {exc.errno}] error while attempting to bind on address ({args.host!r}, {args.port}): {exc.strerror}"
        )
        await runner.cleanup()
        return 1
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    rendezvous: Rendezvous | None = None
    if args.nnodes > 1:  # the other node ranks join before the weights load (SGLang's torch.distributed init)
        rendezvous = Rendezvous(args.nnodes, log)
        log(f"Init torch distributed begin. node rank 0 of {args.nnodes}, dist-init-addr {args.dist_init_addr}")
        try:
            await rendezvous.start(*parse_addr(args.dist_init_addr))
            joined_failure = await rendezvous.wait_all()
        except OSError as exc:
            joined_failure = f"torch.distributed.DistNetworkError: cannot listen on {args.dist_init_addr}: {exc}"
        if joined_failure is not None:
            log(joined_failure)
            await rendezvous.close()
            await runner.cleanup()
            return 1
        log(f"Init torch distributed ends. {args.nnodes} nodes joined.")
    failure = await run_launch(cfg, log, speedup_for(cfg, args.sim_launch_speedup))
    if failure is not None:
        print_failure(log, failure)
        if rendezvous is not None:
            await rendezvous.close()
        await runner.cleanup()
        return 1
    st.engine = EngineLoop(
        cfg,
        time_scale=args.sim_time_scale,
        seed=args.sim_seed,
        noise=args.sim_noise,
        log=log,
        hold_timeout_s=args.sim_hold_timeout_s,
    )
    st.engine.start()
    log.start_serving(args.sim_time_scale)
    st.ready = True
    log("The server is fired up and ready to roll!")
    waits = {asyncio.ensure_future(stop.wait())}
    if rendezvous is not None:
        waits.add(asyncio.ensure_future(rendezvous.lost.wait()))
    await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    lost = rendezvous is not None and rendezvous.lost.is_set() and not stop.is_set()
    log("a node of this server is gone; shutting down." if lost else "Received SIGTERM; shutting down.")
    await st.engine.stop()
    if rendezvous is not None:
        await rendezvous.close()
    await runner.cleanup()
    return 1 if lost else 0


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)  # exits 2 on an unknown flag, like SGLang
    if args.sim_time_scale <= 0:
        build_parser().error(f"argument --sim-time-scale: must be positive, got {args.sim_time_scale}")
    try:
        profile = load_profile(args.sim_profile)
    except ProfileError as exc:
        build_parser().error(f"argument --sim-profile: {exc}")
    log = Logger()
    try:
        cfg = resolve(args, profile, dict(os.environ))
    except ArgsFailure as exc:
        log("Traceback (most recent call last):")
        sys.stdout.write('  File "sglang/srt/server_args.py", line 1, in __post_init__\n')
        for line in exc.lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return 1
    if args.node_rank > 0:  # no HTTP server on this node: join rank 0 and stay (SGLang's non-zero node ranks)
        try:
            return asyncio.run(follow(args.node_rank, args.dist_init_addr or "", log))
        except KeyboardInterrupt:
            return 0
    try:
        return asyncio.run(serve(cfg, log))
    except KeyboardInterrupt:
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
