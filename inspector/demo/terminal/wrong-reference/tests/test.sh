#!/bin/bash
got=$(tr -d '[:space:]' < /app/sum.txt 2>/dev/null)
if [ "$got" = "42" ]; then ok=1; else ok=0; fi
printf '{"reward": %s, "format": 1}\n' "$ok" > /logs/verifier/reward.json
