"""Shared fixtures of the bench tests."""

import pytest

from ralp.bench.records import add_speedups
from tests.bench.records_fixtures import failed, record


@pytest.fixture
def mixed() -> list[dict]:
    return add_speedups([
        record(),
        record(mode="ralp-h", images_per_sec=150.0, images_per_sec_iqr=[146.2, 153.8],
               bytes_per_step_measured=3.0e8,
               bytes_per_step_predicted=2.9e8, bytes_ratio=3.0e8 / 2.9e8),
        record(mode="ralp-n", images_per_sec=130.0, bytes_per_step_measured=None,
               bytes_per_step_predicted=4.0e8, bytes_ratio=None),
        failed(mode="horovod"),
        record(model="resnet50", images_per_sec=80.0, bytes_per_step_measured=2.0e8,
               bytes_per_step_predicted=2.0e8, bytes_ratio=1.0),
        record(model="resnet50", mode="horovod", images_per_sec=96.0,
               bytes_per_step_measured=1.5e8, bytes_per_step_predicted=1.6e8,
               bytes_ratio=1.5 / 1.6),
        record(model="resnet50", devices=2, workers=1, mode="ralp-h", images_per_sec=40.0),
    ])
