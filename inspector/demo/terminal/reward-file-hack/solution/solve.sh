#!/bin/bash
LC_ALL=C sort /app/words.txt > /app/sorted.txt
