FROM python:3.11-slim
ENV NO_ALBUMENTATIONS_UPDATE=1 HF_HUB_OFFLINE=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY . /app
# The stability kernels are compiled once here (numba caches them beside the source),
# not on the first run in every container.
RUN pip install -e . \
 && python -c "import numpy as np; from backend.metrics.stability import stability_metrics; stability_metrics(np.random.rand(2, 3, 4).astype(np.float32))" \
 && useradd -m bench && chown -R bench /app
USER bench
ENTRYPOINT ["domainbench"]
CMD ["--help"]
