echo 41 > /app/sum.txt
