def test_error_count():
    with open("/app/errors.txt") as f:
        assert f.read().strip() == "2"
