# One image for the UI, the workers and the Ray nodes (docker-compose.yml picks the command).
FROM python:3.11-slim
# optional dependency groups of pyproject.toml: "cluster" is Ray with its dashboard and client
ARG EXTRAS=cluster
ENV NO_ALBUMENTATIONS_UPDATE=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 PIP_NO_CACHE_DIR=1 PYTHONUNBUFFERED=1
WORKDIR /app
# libgl/glib: OpenCV's runtime needs; curl-free healthchecks use python instead
RUN apt-get update && apt-get install -y --no-install-recommends libglib2.0-0 && rm -rf /var/lib/apt/lists/*
COPY . /app
# The stability kernels are compiled once here (numba caches them beside the source),
# not on the first run in every container.
RUN pip install -e ".[${EXTRAS}]" \
 && python -c "import numpy as np; from domainbench.metrics.stability import stability_metrics; stability_metrics(np.random.rand(2, 3, 4).astype(np.float32))" \
 && useradd -m bench && chown -R bench /app
USER bench
EXPOSE 8501
ENTRYPOINT ["domainbench"]
CMD ["--help"]
