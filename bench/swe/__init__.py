"""Repository tasks in the SWE-bench format: the fixture instances built from real projects
(`fixtures`), shared by the tests and the benchmark."""
