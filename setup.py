"""Packaging for ralp. Tool settings (ruff, pytest) live in pyproject.toml."""

from setuptools import find_packages, setup

setup(
    name="ralp",
    version="0.1.0",
    description=(
        "Resource-aware layer placement for parameter-server training of CNNs "
        "on tf.distribute.ParameterServerStrategy"
    ),
    packages=find_packages(include=["ralp", "ralp.*"]),
    python_requires=">=3.11,<3.12",
    # TensorFlow itself is an extra: CPU hosts want tensorflow-cpu, GPU clusters the CUDA build.
    install_requires=[
        "keras==3.15.1",
        "numpy==2.4.6",
        "scipy==1.17.1",
        "matplotlib==3.11.2",
        "tqdm==4.70.1",
        "portpicker==1.6.0",
    ],
    extras_require={
        "cpu": ["tensorflow-cpu==2.21.0"],
        "gpu": ["tensorflow[and-cuda]==2.21.0"],
        "test": ["pytest==9.2.0", "pytest-rerunfailures==16.7", "scikit-learn==1.9.1", "ruff==0.17.5"],
    },
)
