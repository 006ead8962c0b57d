"""The MLflow pyfunc face of a saved :class:`~models.predictor.LatencyPredictor`.

The logged model holds the predictor's own directory (LightGBM model texts and
``manifest.json``, no pickles of boosters) as the artifact ``predictor``; this wrapper loads it
with :meth:`LatencyPredictor.load`. The same predictor directory backs both registered models;
what ``predict`` returns differs.
Each output is logged as code (:data:`MODEL_CODE`: ``pyfunc_latency.py``,
``pyfunc_throughput.py``; MLflow's "models from code", so nothing is pickled):

* ``latency`` (``placement-latency``): columns ``ttft_p50, ttft_p95, tpot_p50, tpot_p95`` (s);
* ``throughput`` (``placement-throughput``): column ``throughput_tok_s`` (output tokens/s the
  row's replica delivers at its load).

Input rows are those of :data:`models.features.INPUT_COLUMNS`. The wrapper imports this
project's packages, so the environment that loads it must have ``placement`` installed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pandas as pd
from mlflow.pyfunc.model import PythonModel

from models.predictor import LatencyPredictor
from placement.errors import InputError

PREDICTOR_ARTIFACT = "predictor"
Output = Literal["latency", "throughput"]
OUTPUTS: tuple[Output, ...] = ("latency", "throughput")
THROUGHPUT_COLUMN = "throughput_tok_s"
# per output, the file MLflow logs as the model and runs to rebuild it
MODEL_CODE: dict[Output, Path] = {
    output: Path(__file__).with_name(f"pyfunc_{output}.py") for output in OUTPUTS
}


def predict_output(predictor: LatencyPredictor, frame: pd.DataFrame, output: str) -> pd.DataFrame:
    """What the pyfunc returns for ``output`` (``latency`` or ``throughput``)."""
    if output == "latency":
        return predictor.predict(frame)
    if output == "throughput":
        return pd.DataFrame(
            {THROUGHPUT_COLUMN: predictor.predict_throughput(frame)}, index=frame.index
        )
    raise InputError(f"output {output!r}", field="output", expected=" or ".join(OUTPUTS))


class PredictorModel(PythonModel):
    """Loads the predictor directory from the model's artifacts; predicts one output."""

    def __init__(self, output: Output = "latency") -> None:
        if output not in OUTPUTS:
            raise InputError(f"output {output!r}", field="output", expected=" or ".join(OUTPUTS))
        self.output: Output = output
        self.predictor: LatencyPredictor | None = None

    def __getstate__(self) -> dict[str, Any]:
        # only the choice of output is pickled (models logged before they were logged as
        # code were pickled); the boosters travel as the predictor artifact
        return {"output": self.output}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.output = state["output"]
        self.predictor = None

    def load_context(self, context: Any) -> None:
        self.predictor = LatencyPredictor.load(context.artifacts[PREDICTOR_ARTIFACT])

    def predict(
        self, context: Any, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> pd.DataFrame:
        if self.predictor is None:
            self.load_context(context)
        assert self.predictor is not None
        return predict_output(self.predictor, pd.DataFrame(model_input), self.output)


def unwrap(model: Any) -> LatencyPredictor:
    """The :class:`LatencyPredictor` inside a model loaded with ``mlflow.pyfunc.load_model``."""
    inner = model.unwrap_python_model()
    if not isinstance(inner, PredictorModel) or inner.predictor is None:
        raise InputError(
            "the model is not a placement predictor",
            field="python_model",
            expected="a model logged by `placement train`",
        )
    return inner.predictor
