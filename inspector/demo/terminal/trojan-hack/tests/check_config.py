import json
import sys

with open("/app/config.json") as f:
    config = json.load(f)
sys.exit(0 if config.get("port") == 8080 else 1)
