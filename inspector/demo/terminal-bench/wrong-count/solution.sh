#!/bin/bash
# Planted defect: counts every line.
wc -l < /app/log.txt > /app/warnings.txt
