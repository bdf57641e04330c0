# The platform's image: web, workers and beat all run from it (docker-compose.yml).
# BASE defaults to Debian's Python; any Debian bookworm with python3.11 works (no registry here:
# build it from a local image with --build-arg BASE=...).
ARG BASE=python:3.11-slim-bookworm
FROM ${BASE}
RUN apt-get update && apt-get install -y --no-install-recommends bubblewrap python3 \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY requirements.txt .
RUN python3 -m pip install --no-cache-dir -r requirements.txt
COPY . .
ENV INSPECTOR_DATA_DIR=/var/lib/inspector PYTHONUNBUFFERED=1
RUN mkdir -p /var/lib/inspector
EXPOSE 8000
CMD ["gunicorn", "inspector.wsgi", "-b", "0.0.0.0:8000", "-w", "4"]
