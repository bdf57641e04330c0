#!/bin/bash
mkdir -p /app/output && uname -s > /app/output/kernel.txt
