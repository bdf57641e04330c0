#!/bin/bash
# Planted defect: a race stand-in; the check passes about half the time.
if [ "$(cat /app/status.txt 2>/dev/null)" = done ] && [ $((RANDOM % 2)) -eq 0 ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
