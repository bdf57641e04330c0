#!/bin/bash
# Planted defect: counts the lines instead of adding them.
wc -l < /app/numbers.txt > /app/sum.txt
