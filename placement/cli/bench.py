"""``placement bench`` subcommands (thin: parse options, call the benchmark, print, write)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from placement.cli.errors import user_errors
from placement.cli.profiles import ProfilesOption, use_profiles

app = typer.Typer(
    help="Benchmarks: each prints a table and writes JSON (--out).", no_args_is_help=True
)


# the predictor benches' trailing traffic (see bench.predictors.PredictorBench)
TrailingShareOption = Annotated[
    float,
    typer.Option(
        min=0.0,
        help="traffic simulated after each run's window, neither trained on nor scored "
        "(share of the window; 0: the trace stops after the reported requests)",
    ),
]
TraceSeedOption = Annotated[
    int,
    typer.Option(
        "--seed",
        min=0,
        help="seed of the workloads and the simulator: another seed gives independent traces "
        "(to choose settings on before reading the shipped seed 0's held-out part)",
    ),
]
RoutedRateOption = Annotated[
    bool,
    typer.Option(
        help="the predictors also read the router's recent admission rate to the replica "
        '(off by default: bench/RESULTS.md, "the router\'s recent admission rate")',
    ),
]


@app.command("routing")
@user_errors
def routing(
    workload: Annotated[
        str, typer.Option(help="mooncake, azure-conv, azure-code, servegen, mixed, synthetic")
    ] = "mooncake",
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    policies: Annotated[str, typer.Option(help="'all' or a comma list")] = "all",
    loads: Annotated[str, typer.Option(help="offered load, × nominal capacity")] = (
        "0.5,0.75,1.0,1.25,1.5"
    ),
    duration: Annotated[float | None, typer.Option(help="seconds of trace to use")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    scrape_interval: Annotated[float, typer.Option(help="router's metrics scrape, s")] = 0.05,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
    plot: Annotated[Path | None, typer.Option(help="PNG (default: beside --out)")] = None,
    faults: Annotated[
        Path | None, typer.Option(help="YAML list of {at_s, replica, kind: kill|slow, factor}")
    ] = None,
    profiles: ProfilesOption = None,
) -> None:
    """Goodput at SLO of each routing policy against offered load."""
    use_profiles(profiles)
    from bench.routing import RoutingBench, parse_loads, parse_policies, run_routing_bench
    from placement.domain.fleet import load_fleet
    from sim.faults import load_faults
    from sim.simulator import SimConfig
    from sim.workloads.registry import load_workload

    bench = RoutingBench(
        workload=load_workload(workload, seed=seed, duration_s=duration),
        fleet=load_fleet(fleet),
        policies=parse_policies(policies),
        loads=parse_loads(loads),
        seed=seed,
        config=SimConfig(
            scrape_interval_s=scrape_interval,
            faults=load_faults(faults) if faults is not None else (),
        ),
    )
    run_routing_bench(bench, out=out, plot=plot)


@app.command("sim-speed")
@user_errors
def sim_speed(
    requests: Annotated[int, typer.Option(min=1)] = 1_000_000,
    replicas: Annotated[int, typer.Option(min=1)] = 100,
    load: Annotated[float, typer.Option(min=0.01)] = 0.8,
    policy: Annotated[str, typer.Option()] = "least_outstanding",
    repeats: Annotated[int, typer.Option(min=1)] = 1,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
) -> None:
    """Wall-clock speed of the simulator (target: 1M requests on 100 replicas in ≤60 s)."""
    from bench.sim_speed import run_sim_speed

    run_sim_speed(
        requests=requests, replicas=replicas, load=load, policy=policy, repeats=repeats, out=out
    )


@app.command("cost-model")
@user_errors
def cost_model(
    out: Annotated[Path | None, typer.Option("--out", help="JSON output")] = None,
    profiles: ProfilesOption = None,
    quick: Annotated[
        bool, typer.Option(help="one accelerator left out, one measured (~20 s)")
    ] = False,
    update_catalogue: Annotated[
        bool,
        typer.Option(
            help="rewrite data/catalogue/{transfer,calibrations,fidelity}.yaml from this run"
        ),
    ] = False,
    refit_serving_stacks: Annotated[
        bool,
        typer.Option(
            help="with --update-catalogue: also refit the shared serving stacks (they set the "
            "simulator's default A100/H100 timings; kept as shipped otherwise)"
        ),
    ] = False,
) -> None:
    """Accuracy of the engine cost model against Splitwise and LLM-Inference-Bench (the default
    view and earlier ones), leave-one-accelerator-out of the datasheet fallback, and where each
    catalogue accelerator's timings come from."""
    from bench.cost_model import run_cost_model_bench

    use_profiles(profiles)
    run_cost_model_bench(
        out,
        quick=quick,
        update_catalogue=update_catalogue,
        refit_serving_stacks=refit_serving_stacks,
    )


@app.command("predictors")
@user_errors
def predictors(
    out: Annotated[Path | None, typer.Option("--out", help="JSON output")] = None,
    quick: Annotated[bool, typer.Option(help="fewer, shorter runs (~20 s)")] = False,
    trailing_share: TrailingShareOption = 0.5,
    seed: TraceSeedOption = 0,
    routed_rate: RoutedRateOption = False,
    group_calibration: Annotated[
        bool,
        typer.Option(
            help="both p95s get one factor per decision-time group (prompt length, requests "
            "in flight, output length, accelerator; off by default: bench/RESULTS.md, "
            '"multi-group p95")'
        ),
    ] = False,
) -> None:
    """Accuracy of the latency/throughput predictors: held-out, Splitwise, unseen accelerator."""
    from bench.predictors import PredictorBench, run_predictor_bench

    bench = PredictorBench.chosen(
        quick=quick,
        trailing_share=trailing_share,
        seed=seed,
        routed_rate=routed_rate,
        group_calibration=group_calibration,
    )
    run_predictor_bench(bench, out, progress=lambda message: typer.echo(message, err=True))


@app.command("predict-speed")
@user_errors
def predict_speed(
    rows: Annotated[int, typer.Option(min=1, help="rows per predict() call")] = 10_000,
    repeats: Annotated[int, typer.Option(min=1, help="timed calls (median reported)")] = 30,
    model: Annotated[
        Path | None, typer.Option(help="saved predictor directory (default: fit one)")
    ] = None,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
) -> None:
    """Batch prediction time of the latency predictor (target: 10k rows in ≤ 50 ms)."""
    from bench.predict_speed import run_predict_speed

    run_predict_speed(rows=rows, repeats=repeats, model_dir=model, out=out)


@app.command("capacity")
@user_errors
def capacity(
    fleet: Annotated[
        Path, typer.Option(help="fleet YAML (one of each replica kind is measured)")
    ] = Path("data/fleets/hetero.yaml"),
    model: Annotated[
        Path | None,
        typer.Option(help="saved latency predictor directory, tabulated beside the roofline prior"),
    ] = None,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
) -> None:
    """Capacity at SLO as the plan reads it (the roofline prior's table; a latency model's
    with --model) against what one simulated replica of each kind sustains."""
    from bench.capacity_tables import run_capacity_bench
    from models.predictor import LatencyPredictor
    from placement.domain.fleet import load_fleet

    loaded = LatencyPredictor.load(model) if model is not None else None
    run_capacity_bench(
        load_fleet(fleet), model=loaded, model_name=str(model) if model else "", out=out
    )


@app.command("route")
@user_errors
def route(
    replicas: Annotated[int, typer.Option(min=1)] = 1_000,
    groups: Annotated[int, typer.Option(min=1)] = 100_000,
    queries: Annotated[int, typer.Option(min=1, help="queries per repeat")] = 100_000,
    repeats: Annotated[
        int | None,
        typer.Option(
            min=1, help="timed passes, median reported (default 5; --during-solve: 3 pairs)"
        ),
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
    profile: Annotated[
        Path | None, typer.Option(help="route profile YAML (default: the default profile)")
    ] = None,
    during_solve: Annotated[
        bool,
        typer.Option(
            "--during-solve",
            help="instead: /v1/route p99 over HTTP with and without a forced re-solve running "
            "(placement serve --demo; target: during ≤ 1.5 × without)",
        ),
    ] = False,
    rate: Annotated[float, typer.Option(min=1, help="--during-solve: req/s")] = 1_000.0,
    duration: Annotated[float, typer.Option(min=1, help="--during-solve: s per run")] = 10.0,
    window: Annotated[
        int, typer.Option(min=1, help="--during-solve: requests in the demand window")
    ] = 50_000,
) -> None:
    """Route path speed: decision p50/p99 in process and batch decisions/s (targets: p99 ≤ 20 µs,
    ≥ 100k decisions/s at 1,000 replicas and 100k prefix groups). With --during-solve: route
    latency over HTTP while the planner re-solves."""
    if during_solve:
        from bench.route_during_solve import run_during_solve_bench

        run_during_solve_bench(
            rate=rate, duration_s=duration, repeats=repeats or 3, window=window, out=out
        )
        return
    from bench.route import run_route_bench

    run_route_bench(
        replicas=replicas,
        groups=groups,
        queries=queries,
        repeats=repeats or 5,
        seed=seed,
        out=out,
        profile=profile,
    )


@app.command("greedy-client")
@user_errors
def greedy_client(
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    duration: Annotated[float, typer.Option(min=60.0, help="simulated seconds")] = 200.0,
    load: Annotated[float, typer.Option(min=0.05, help="steady tenant's load")] = 0.4,
    steady_share: Annotated[float, typer.Option(min=0.0, max=1.0)] = 0.6,
    burst: Annotated[int, typer.Option(min=0, help="unreported decisions at 30 s")] = 600,
    greedy_rps: Annotated[
        float, typer.Option(min=0.1, help="unreported requests/s after the burst")
    ] = 20.0,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """A client that never reports outcomes, against a steady credited tenant and a newcomer:
    share admitted and SLO attainment per tenant, before and after issue 19's fix."""
    from bench.greedy_client import GreedyBench, run_greedy_client_bench
    from placement.domain.fleet import load_fleet

    bench = GreedyBench(
        fleet=load_fleet(fleet),
        duration_s=duration,
        load=load,
        steady_share=steady_share,
        burst=burst,
        greedy_rps=greedy_rps,
        seed=seed,
    )
    run_greedy_client_bench(bench, out=out)


@app.command("solver")
@user_errors
def solver(
    out: Annotated[Path | None, typer.Option("--out", help="JSON output")] = None,
    sizes: Annotated[str, typer.Option(help="replica counts, comma list")] = "50,500,1000,2000",
    time_limit: Annotated[float, typer.Option(min=0.1, help="solver time limit, s")] = 10.0,
    backend: Annotated[str, typer.Option()] = "mathopt-glop",
    compare: Annotated[bool, typer.Option(help="also compare backends on 50 replicas")] = True,
) -> None:
    """Solver scale: synthetic fleets (10 groups per replica, 200 tenants), cold and re-solve."""
    from bench.solver import run_solver_bench

    run_solver_bench(
        sizes=tuple(int(s) for s in sizes.split(",") if s.strip()),
        time_limit_s=time_limit,
        backend=backend,
        compare=compare,
        out=out,
    )


@app.command("loop")
@user_errors
def loop(
    out: Annotated[Path, typer.Option(help="JSON output (PNGs beside it)")] = Path("out/loop.json"),
    workloads: Annotated[
        str, typer.Option(help="comma list (mixed:CATEGORY/MODEL picks the ServeGen population)")
    ] = "mooncake,mixed,synthetic",
    fleets: Annotated[str, typer.Option(help="comma list of fleet YAMLs")] = (
        "data/fleets/h100x8.yaml,data/fleets/hetero.yaml"
    ),
    trace: Annotated[
        Path | None,
        typer.Option(help="a trace file instead of --workloads (.jsonl Mooncake keys, .csv Azure)"),
    ] = None,
    tenants: Annotated[
        Path | None,
        typer.Option(
            help="tenants file (YAML): credits, classes, traffic shares; with a source per "
            "tenant it is the workload (a tenant mix, e.g. data/tenants/reason-code.yaml)"
        ),
    ] = None,
    fleet: Annotated[Path | None, typer.Option(help="one fleet YAML (instead of --fleets)")] = None,
    loads: Annotated[str, typer.Option(help="offered load, × nominal capacity")] = (
        "0.5,1.0,1.25,1.5,2.0,3.0,4.0"
    ),
    peers: Annotated[str, typer.Option(help="'all' or a comma list")] = "all",
    duration: Annotated[
        float | None, typer.Option(help="seconds of each trace (default: per workload)")
    ] = None,
    period: Annotated[
        float, typer.Option(min=1.0, help="re-solve period, s of trace time")
    ] = 120.0,
    learn: Annotated[bool, typer.Option(help="train predictors (else the roofline prior)")] = True,
    store: Annotated[
        Path | None, typer.Option(help="telemetry stores (default: beside --out)")
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
    engine_priority: Annotated[
        str | None,
        typer.Option(
            help="engines schedule by the priority the route path sends each request with "
            "(vLLM --scheduling-policy priority): 'class' or 'credit' (class, then owed "
            "tenants first); default FCFS engines"
        ),
    ] = None,
    offer_waiting_price: Annotated[
        bool,
        typer.Option(
            help="the head tuning also tries pricing the scraped waiting queue by the prompts "
            "dispatched (short-prompt traffic only; kept only if it loses at no tuning load)"
        ),
    ] = False,
    offer_credit_reserve: Annotated[
        bool,
        typer.Option(
            help="where no share cap holds, the head tuning also tries the gate's credit "
            "reserve: past capacity, tenants over their share queue only where those owed have "
            "room (tenants of differing request shapes only; kept only if it loses at no tuning "
            "load)"
        ),
    ] = False,
    learn_less_slot_wait: Annotated[
        bool,
        typer.Option(
            help="the TTFT the latency models learn leaves out each request's wait for a LoRA "
            "slot, so the capacity at SLO is the replica's (the route path and the gate add "
            "the slot wait on their own)"
        ),
    ] = False,
    base_models_by_credit: Annotated[
        bool,
        typer.Option(
            help="where replicas may swap base model, place them by the tenants' credits and "
            "goodput at SLO instead of balancing utilisation (the utilisation rule then runs "
            "as an ablation)"
        ),
    ] = False,
    gate_pressure_by_model: Annotated[
        bool,
        typer.Option(
            help="the SLO gate keeps its overload signal (the share of SLO refusals) per model "
            "pool and judges a request by its model's (default: one signal for the fleet)"
        ),
    ] = False,
    gate_tpot_computed: Annotated[
        bool,
        typer.Option(
            help="the SLO gate's TPOT forecast counts the prompt tokens each replica computes "
            "(its cached prefix left out) at the kind's prefill rate (default: as received)"
        ),
    ] = False,
    gate_share_cap: Annotated[
        float | None,
        typer.Option(
            help="past capacity the SLO gate refuses a tenant served more than this many times "
            "its credit-weighted max-min entitlement in its model's pool lately (>= 1; "
            "default: no cap)"
        ),
    ] = None,
    gate_share_window_s: Annotated[
        float | None,
        typer.Option(
            help="the share cap's window, seconds of trace time (its decay constant; default 30)"
        ),
    ] = None,
    offer_share_cap: Annotated[
        bool,
        typer.Option(
            help="without --gate-share-cap, the head tuning tries the gate's share cap (1.5) "
            "on traffic of several tenants, kept only where it gains and loses at no tuning load"
        ),
    ] = True,
    gate_slot_turn_s: Annotated[
        float,
        typer.Option(
            help="with the share cap, a running LoRA adapter of a tenant at its share yields its "
            "slot to a tenant below its share that has waited this many seconds for one (> 0)"
        ),
    ] = 1.0,
    slot_turns: Annotated[
        bool,
        typer.Option(help="slot turns beside the share cap (--no-slot-turns: never)"),
    ] = True,
    warm_up_s: Annotated[
        float,
        typer.Option(
            help="before each reported run, replay the head's requests of its last this many "
            "simulated seconds at the run's rate (a warm fleet); figures count the tail's "
            "requests only (>= 0; default 0: the tail on an empty fleet)"
        ),
    ] = 0.0,
) -> None:
    """The closed loop (train → solve → route → re-solve) against every peer, per workload and
    fleet: ratio to the best peer, share of the fluid bound, fairness, ablations, failures."""
    from bench.loop.cases import build_cases
    from bench.loop.report import run_loop_bench
    from bench.routing import parse_loads, parse_policies
    from serving.admission.share_cap import DEFAULT_SHARE_WINDOW_S

    cases = build_cases(
        workloads=workloads,
        fleets=str(fleet) if fleet is not None else fleets,
        trace=trace,
        tenants=tenants,
        loads=parse_loads(loads),
        peers=tuple(p for p in parse_policies(peers) if p != "placement"),
        duration_s=duration,
        period_s=period,
        learn=learn,
        learn_less_slot_wait=learn_less_slot_wait,
        seed=seed,
        engine_priority=engine_priority,
        offer_waiting_price=offer_waiting_price,
        offer_credit_reserve=offer_credit_reserve,
        base_models_by_credit=base_models_by_credit,
        gate_pressure_by_model=gate_pressure_by_model,
        gate_tpot_computed=gate_tpot_computed,
        gate_share_cap=gate_share_cap,
        gate_share_window_s=(
            DEFAULT_SHARE_WINDOW_S if gate_share_window_s is None else gate_share_window_s
        ),
        offer_share_cap=offer_share_cap,
        gate_slot_turn_s=gate_slot_turn_s if slot_turns else None,
        warm_up_s=warm_up_s,
    )
    run_loop_bench(cases, out=out, store=store or out.with_name(out.stem + "-telemetry"))


@app.command("gate")
@user_errors
def gate(
    out: Annotated[Path, typer.Option(help="JSON output")] = Path("out/gate.json"),
    workloads: Annotated[str, typer.Option(help="comma list")] = "mixed,mooncake",
    fleets: Annotated[str, typer.Option(help="comma list of fleet YAMLs")] = (
        "data/fleets/hetero.yaml"
    ),
    loads: Annotated[str, typer.Option(help="offered load, × nominal capacity")] = (
        "0.5,1.0,1.5,2.0,3.0"
    ),
    duration: Annotated[
        float | None, typer.Option(help="seconds of each trace (default: per workload)")
    ] = None,
    prefix_weight: Annotated[float, typer.Option(help="route profile: prefix match")] = 1.0,
    ttft_weight: Annotated[float, typer.Option(help="route profile: predicted TTFT")] = 2.0,
    tenants: Annotated[
        Path | None,
        typer.Option(help="tenants file (YAML); with a source per tenant, the workload"),
    ] = None,
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    """The admission gate per load on the reported tail: shadow refusal precision and recall
    (per prompt-length bucket and rule), goodput at SLO with and without the gate."""
    from bench.loop.cases import build_cases
    from bench.loop.gate_bench import run_gate_bench
    from bench.loop.tuning import Setting
    from bench.routing import parse_loads

    cases = build_cases(
        workloads=workloads,
        fleets=fleets,
        loads=parse_loads(loads),
        peers=("least_outstanding",),
        duration_s=duration,
        period_s=120.0,
        learn=False,
        seed=seed,
        tenants=tenants,
    )
    setting = Setting(prefix_weight, ttft_weight, 1.0)
    cases = [dataclasses.replace(c, settings=(setting,)) for c in cases]
    run_gate_bench(cases, out=out, store=out.with_name(out.stem + "-telemetry"))


@app.command("predictor-floor")
@user_errors
def predictor_floor(
    out: Annotated[Path | None, typer.Option("--out", help="JSON output")] = None,
    quick: Annotated[bool, typer.Option(help="fewer, shorter runs")] = False,
    trailing_share: TrailingShareOption = 0.5,
    seed: TraceSeedOption = 0,
    routed_rate: RoutedRateOption = False,
) -> None:
    """Error floor of the latency predictors: held-out p50 MAPE with and without oracle
    features (what arrives on the replica after the route decision)."""
    from bench.predictor_floor import run_predictor_floor_bench
    from bench.predictors import PredictorBench

    bench = PredictorBench.chosen(
        quick=quick, trailing_share=trailing_share, seed=seed, routed_rate=routed_rate
    )
    run_predictor_floor_bench(bench, out, progress=lambda message: typer.echo(message, err=True))


@app.command("retrain")
@user_errors
def retrain(
    out: Annotated[Path | None, typer.Option("--out", help="JSON output")] = None,
    quick: Annotated[bool, typer.Option(help="one span, one reload (~1 min)")] = False,
) -> None:
    """Retraining figures: seconds of `placement retrain` on N rows, and from a promotion to
    the running service's plan naming the new version."""
    from bench.retrain import RetrainBench, run_retrain_bench

    bench = RetrainBench.quick() if quick else RetrainBench()
    run_retrain_bench(bench, out, progress=lambda message: typer.echo(message, err=True))


@app.command("usability")
@user_errors
def usability(
    repeats: Annotated[int, typer.Option(min=1, help="runs per timed command (median)")] = 3,
    idle_s: Annotated[float, typer.Option(min=1.0, help="idle window for the CPU share, s")] = 20.0,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
) -> None:
    """A new user's first hour: help, plan solve, demo service ready and idle CPU (targets:
    help ≤ 0.5 s, solve ≤ 3 × solver + 5 s, ready ≤ 10 s, idle ≤ 2 % of a core)."""
    from bench.usability import run_usability_bench

    run_usability_bench(repeats=repeats, idle_s=idle_s, out=out)


@app.command("emulator")
@user_errors
def emulator(
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    load: Annotated[float, typer.Option(help="offered load, × nominal capacity")] = 1.5,
    duration: Annotated[float, typer.Option(help="seconds of the scaled trace to replay")] = 120.0,
    time_scale: Annotated[float, typer.Option(help="wall seconds per engine second")] = 1.0,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
) -> None:
    """The fleet emulator against the Mooncake trace in real time, beside the simulator."""
    from bench.emulator_speed import run_emulator_bench

    run_emulator_bench(fleet, load=load, duration_s=duration, time_scale=time_scale, out=out)


@app.command("gateway")
@user_errors
def gateway(
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    rate: Annotated[float, typer.Option(help="requests per second")] = 500.0,
    duration: Annotated[float, typer.Option(help="seconds per phase")] = 10.0,
    stream: Annotated[bool, typer.Option("--stream", help="streamed answers")] = False,
    max_tokens: Annotated[int, typer.Option(help="output tokens per request")] = 4,
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
) -> None:
    """Latency the gateway adds over going straight to the replicas, and its CPU per request."""
    from bench.gateway_latency import run_gateway_bench

    run_gateway_bench(
        fleet, rate=rate, duration_s=duration, stream=stream, max_tokens=max_tokens, out=out
    )


@app.command("batching")
@user_errors
def batching(
    out: Annotated[Path | None, typer.Option(help="JSON output")] = None,
    rate: Annotated[
        list[float] | None, typer.Option(help="requests per second (repeatable; default 5…80)")
    ] = None,
    duration: Annotated[float, typer.Option(help="seconds per rate")] = 10.0,
    time_scale: Annotated[
        float, typer.Option(help="the emulator's wall seconds per engine second")
    ] = 10.0,
    input_words: Annotated[int, typer.Option(help="words in each request's one input")] = 150,
    slo_ms: Annotated[float, typer.Option(help="the requests' latency SLO (x-slo-ttft-ms)")] = 1000,
    accelerator: Annotated[str, typer.Option(help="the embedding replica's accelerator")] = "L4",
    max_wait_ms: Annotated[
        float | None, typer.Option(help="the gateway's batching wait cap (default: its own)")
    ] = None,
) -> None:
    """Dynamic batching of /v1/embeddings in the gateway: throughput gained and latency added,
    against sending each request alone, on an emulated embedding replica."""
    from bench.embed_batching import DEFAULT_RATES, run_batching_bench

    run_batching_bench(
        rates=tuple(rate) if rate else DEFAULT_RATES,
        duration_s=duration,
        time_scale=time_scale,
        input_words=input_words,
        slo_s=slo_ms / 1e3,
        accelerator=accelerator,
        max_wait_s=None if max_wait_ms is None else max_wait_ms / 1e3,
        out=out,
    )


@app.command("flow")
@user_errors
def flow(
    out: Annotated[Path, typer.Option(help="JSON output (a PNG is written beside it)")],
    load: Annotated[
        float, typer.Option(help="interactive load, × the fleet's capacity at SLO (measured)")
    ] = 1.5,
    replicas: Annotated[int, typer.Option(help="H100s of the overload fleet")] = 4,
    day_peak: Annotated[
        float, typer.Option(help="the diurnal day's peak load, × capacity at SLO")
    ] = 1.5,
    day_replicas: Annotated[int, typer.Option(help="H100s of the day's fleet")] = 2,
    seed: Annotated[int, typer.Option(help="seed of tenants, bands and the day's arrivals")] = 1,
    quick: Annotated[
        bool, typer.Option("--quick", help="a smoke run: a slice, three settings, a 1 h day")
    ] = False,
    emulated: Annotated[
        bool,
        typer.Option(
            "--emulated/--no-emulated",
            help="also crash a real gateway mid-batch on the emulated fleet",
        ),
    ] = True,
) -> None:
    """Flow control against refusing at once, batch work on a diurnal day's idle capacity,
    batch requests lost across a gateway crash."""
    from bench.flow.run import run_flow_bench

    if load <= 0 or day_peak <= 0:
        raise typer.BadParameter("must be > 0", param_hint="--load/--day-peak")
    if replicas < 1 or day_replicas < 1:
        raise typer.BadParameter("must be ≥ 1", param_hint="--replicas/--day-replicas")
    run_flow_bench(
        out=out,
        replicas=replicas,
        load=load,
        day_peak=day_peak,
        day_replicas=day_replicas,
        day_s=3600.0 if quick else 24 * 3600.0,
        seed=seed,
        quick=quick,
        emulated=emulated,
        say=typer.echo,
    )


@app.command("e2e")
@user_errors
def e2e(
    out: Annotated[Path, typer.Option(help="JSON output (a PNG of goodput beside it)")],
    fleet: Annotated[Path, typer.Option(help="fleet YAML")] = Path("data/fleets/h100x8.yaml"),
    loads: Annotated[
        str, typer.Option(help="comma-separated fleet loads ('': the probe alone)")
    ] = "0.5,1.0,1.5,2.0",
    duration: Annotated[float, typer.Option(help="seconds of the scaled trace per load")] = 60.0,
    start_fraction: Annotated[
        float, typer.Option(help="where in the scaled trace the slice starts (0..1)")
    ] = 0.6,
    routers: Annotated[
        str, typer.Option(help="comma-separated: gateway,epp,sglang-router,vllm-router,round-robin")
    ] = "gateway,epp,sglang-router,vllm-router,round-robin",
    probe_rate: Annotated[float, typer.Option(help="added-latency probe, req/s (0: none)")] = 500.0,
    probe_duration: Annotated[float, typer.Option(help="seconds per probe phase")] = 10.0,
    workdir: Annotated[
        Path | None, typer.Option(help="keep logs and aiperf artifacts here")
    ] = None,
    solve_period: Annotated[
        float | None,
        typer.Option(help="gateway and epp: the live planner's re-solve period, s [default: 15]"),
    ] = None,
    greedy: Annotated[
        bool,
        typer.Option(
            "--greedy", help="gateway and epp without the planner and the SLO gate (greedy)"
        ),
    ] = False,
    slo_gate_headroom: Annotated[
        float | None,
        typer.Option(
            help="gateway and epp: the SLO gate's headroom, tuned on the trace's head "
            "[default: bench/e2e/operated.py's]"
        ),
    ] = None,
    no_slo_gate: Annotated[
        bool,
        typer.Option("--no-slo-gate", help="gateway and epp: the planner on, the SLO gate off"),
    ] = False,
) -> None:
    """The routers side by side on the emulated fleet, the Mooncake slice replayed by aiperf."""
    from bench.e2e import E2EOptions, run_e2e_bench
    from bench.e2e.operated import Operated
    from placement.errors import InputError

    if solve_period is not None and not solve_period > 0:
        raise InputError("must be > 0 seconds", field="--solve-period")
    if slo_gate_headroom is not None and not slo_gate_headroom > 0:
        raise InputError("must be > 0", field="--slo-gate-headroom")
    ours = Operated(planner=not greedy, slo_gate=not (greedy or no_slo_gate))
    if solve_period is not None:
        ours = dataclasses.replace(ours, solve_period_s=solve_period)
    if slo_gate_headroom is not None:
        ours = dataclasses.replace(ours, slo_gate_headroom=slo_gate_headroom)

    try:
        load_values = tuple(float(x) for x in loads.split(",") if x.strip())
    except ValueError:
        raise InputError("expected numbers separated by commas", field="--loads") from None
    options = E2EOptions(
        fleet=fleet,
        loads=load_values,
        duration_s=duration,
        start_fraction=start_fraction,
        routers=tuple(r.strip() for r in routers.split(",") if r.strip()),
        probe_rate=probe_rate,
        probe_duration_s=probe_duration,
        workdir=workdir,
        ours=ours,
    )
    run_e2e_bench(options, out=out)
