#!/bin/bash
echo '{"port": 8080}' > /app/config.json
