"""The code MLflow logs as the ``latency`` pyfunc model ("models from code"): MLflow
rebuilds the model by running this file, not by unpickling it; the boosters come from the
model's ``predictor`` artifact."""

from mlflow.models import set_model

from training.pyfunc import PredictorModel

set_model(PredictorModel("latency"))
