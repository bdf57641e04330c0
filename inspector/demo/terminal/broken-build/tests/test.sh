#!/bin/bash
if grep -q '^jq-' /app/jq-version.txt 2>/dev/null; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
