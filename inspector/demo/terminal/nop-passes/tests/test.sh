#!/bin/bash
# Planted defect: checks that /app exists, which the image already guarantees.
if [ -d /app ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt
