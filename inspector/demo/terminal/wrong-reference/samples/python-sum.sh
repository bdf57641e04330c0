python3 -c "print(sum(int(l) for l in open('/app/numbers.txt')))" > /app/sum.txt
