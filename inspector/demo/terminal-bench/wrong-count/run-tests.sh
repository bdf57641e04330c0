#!/bin/bash
test "$(tr -d '[:space:]' < /app/warnings.txt)" = 3
