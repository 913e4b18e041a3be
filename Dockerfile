FROM python:3.11-slim
ENV NO_ALBUMENTATIONS_UPDATE=1 HF_HUB_OFFLINE=1 PIP_NO_CACHE_DIR=1
WORKDIR /app
COPY . /app
RUN pip install -e . && useradd -m bench && chown -R bench /app
USER bench
ENTRYPOINT ["domainbench"]
CMD ["--help"]
