"""`callbacks.GRPOMetrics` logs at each step what that step measured, and nothing it did not."""

import torch
from lightning.pytorch import LightningModule, Trainer
from lightning.pytorch.loggers.logger import Logger

from callbacks import GRPOMetrics


class Rows(Logger):
    name, version = "rows", 0

    def __init__(self):
        super().__init__()
        self.rows = []

    @property
    def experiment(self):
        return None

    def log_hyperparams(self, *args, **kwargs):
        pass

    def log_metrics(self, metrics, step):
        self.rows.append({k: v for k, v in metrics.items() if k != "epoch"})


class Measures(LightningModule):
    """Step 0 measures a jigsaw batch, step 1 a rotation batch, step 2 both (as a mixed data module
    would)."""

    MEASURED = [
        {"train/jigsaw/reward": 0.5},
        {"train/rotation/reward": 0.25},
        {"train/jigsaw/reward": 1.0, "train/rotation/reward": 0.75},
    ]

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(1))

    def training_step(self, batch, batch_idx):
        return {"loss": (self.weight * batch[0]).sum(), "metrics": self.MEASURED[batch_idx]}

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)

    def train_dataloader(self):
        return torch.utils.data.DataLoader(torch.ones(3, 1), batch_size=1)


def test_a_metric_the_step_did_not_measure_is_not_logged_again_with_a_stale_value():
    logger = Rows()
    Trainer(
        max_steps=3,
        logger=logger,
        log_every_n_steps=1,
        callbacks=[GRPOMetrics(summary=False, results="")],
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
    ).fit(Measures())
    assert logger.rows == Measures.MEASURED
