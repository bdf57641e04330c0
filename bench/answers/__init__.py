"""The answer-graded benchmarks: the planted set (`planted`), its scoring (`scoring`), and the
offline run over a stand-in verifier (`offline`) on the planted sets and real GSM8K."""
