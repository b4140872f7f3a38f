"""The web page in a real browser: headless Chromium types a sentence and reads the heatmap.

Needs Debian's chromium and chromium-driver (make install installs them) and Python's selenium;
skipped with the reason where they are missing. The screenshot goes to
test-artifacts/serve_page.png at the top of the checkout.
"""

import shutil
from pathlib import Path

import pytest

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"


@pytest.fixture(scope="module")
def browser():
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium is not installed")
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("chromium and chromedriver are not installed (apt-get install chromium-driver)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--disable-background-networking",
        "--disable-component-update",
        "--no-first-run",
        "--window-size=1100,900",
    ):
        options.add_argument(flag)
    service = webdriver.ChromeService(executable_path=driver)
    chrome = webdriver.Chrome(options=options, service=service)
    yield chrome
    chrome.quit()


def test_the_page_translates_and_draws_the_heatmap(browser, service):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(service.url + "/")
    wait = WebDriverWait(browser, 30)
    wait.until(ready.text_to_be_present_in_element((By.ID, "direction"), "zh → en"))
    browser.find_element(By.ID, "source").send_keys("我们明天去公园。")
    browser.find_element(By.ID, "submit").click()
    wait.until(lambda page: page.find_elements(By.CSS_SELECTOR, "#heatmap td.cell"))
    translation = browser.find_element(By.ID, "translation").text
    best = service.translate({"text": ["我们明天去公园。"], "beam_size": 5, "n_best": 3})[1]
    expected = best["translations"][0]
    assert translation == expected["text"] != ""
    rows = browser.find_elements(By.CSS_SELECTOR, "#heatmap tbody tr")
    sources = browser.find_elements(By.CSS_SELECTOR, "#heatmap thead th")[1:]
    cells = browser.find_elements(By.CSS_SELECTOR, "#heatmap td.cell")
    target_pieces = expected["hypotheses"][0]["target_pieces"]
    assert [th.text for th in sources] == expected["source_pieces"]
    assert len(rows) == len(target_pieces) and len(cells) == len(target_pieces) * len(sources)
    assert "去" in [th.text for th in sources]  # CJK text as characters
    weights = [float(c.get_attribute("data-weight")) for c in cells[: len(sources)]]
    assert abs(sum(weights) - 1) < 0.01  # the first row is one softmax
    items = browser.find_elements(By.CSS_SELECTOR, "#nbest-list li")
    assert len(items) == len(expected["hypotheses"])
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "serve_page.png"))


def test_the_page_asks_once_for_the_token_of_a_service_that_needs_one(browser, trained_run):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.serve.conftest import Service

    token = "page-token-0123456789abcdef"
    service = Service(trained_run / "best.pt", "threads=1", token=token)
    try:
        browser.get(service.url + "/")
        wait = WebDriverWait(browser, 30)
        prompt = wait.until(ready.alert_is_present())
        prompt.send_keys(token)
        prompt.accept()
        wait.until(ready.text_to_be_present_in_element((By.ID, "direction"), "zh → en"))
        browser.find_element(By.ID, "source").send_keys("我很好。")
        browser.find_element(By.ID, "submit").click()  # no second prompt: the token is kept
        wait.until(lambda page: page.find_element(By.ID, "translation").text)
        assert browser.find_element(By.ID, "error").text == ""
    finally:
        service.stop()


def test_the_page_shows_each_model_side_by_side_with_its_alignment(browser, models_service):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    sentence = "我们明天去公园。"
    browser.get(models_service.url + "/")
    wait = WebDriverWait(browser, 30)
    wait.until(ready.text_to_be_present_in_element((By.ID, "direction"), "best · early · both"))
    browser.find_element(By.ID, "source").send_keys(sentence)
    browser.find_element(By.ID, "submit").click()
    panels = browser.find_elements(By.CSS_SELECTOR, "#panels .panel")
    assert [p.get_attribute("data-model") for p in panels] == ["best", "early", "both"]
    wait.until(lambda page: all(p.find_elements(By.CSS_SELECTOR, "td.cell") for p in panels))
    assert browser.find_element(By.ID, "error").text == ""
    tops = {p.get_attribute("data-model"): p.location["y"] for p in panels}
    assert tops["best"] == tops["early"]  # side by side
    for panel in panels:
        name = panel.get_attribute("data-model")
        body = {"text": [sentence], "beam_size": 5, "n_best": 3, "attention": True, "model": name}
        (expected,) = models_service.translate(body)[1]["translations"]
        best = expected["hypotheses"][0]
        assert panel.find_element(By.CSS_SELECTOR, "h2.model").text.startswith(f"{name} · zh → en")
        assert panel.find_element(By.CSS_SELECTOR, ".translation").text == expected["text"] != ""
        sources = panel.find_elements(By.CSS_SELECTOR, ".heatmap thead th")[1:]
        rows = panel.find_elements(By.CSS_SELECTOR, ".heatmap tbody tr")
        assert [th.text for th in sources] == expected["source_pieces"]
        assert len(rows) == len(best["target_pieces"])
        marked = [
            [t, s]
            for t, row in enumerate(rows)
            for s, cell in enumerate(row.find_elements(By.CSS_SELECTOR, "td.cell"))
            if "link" in cell.get_attribute("class").split()
        ]
        assert marked and sorted(marked) == sorted([t, s] for s, t in best["alignment"])
        items = panel.find_elements(By.CSS_SELECTOR, ".nbest-list li")
        assert len(items) == len(expected["hypotheses"])
    # The default model's panel keeps the ids of the one-model page.
    assert panels[0].find_element(By.CSS_SELECTOR, ".heatmap").get_attribute("id") == "heatmap"
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "serve_page_models.png"))


def test_two_lines_in_the_box_translate_both_with_every_model(browser, models_service):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ready
    from selenium.webdriver.support.ui import WebDriverWait

    lines = ["我很好。你好！", "我们明天去公园。"]  # the first a paragraph of two sentences
    browser.get(models_service.url + "/")
    wait = WebDriverWait(browser, 30)
    wait.until(ready.text_to_be_present_in_element((By.ID, "direction"), "best · early · both"))
    box = browser.find_element(By.ID, "source")
    box.clear()
    box.send_keys("\n".join(lines))
    browser.find_element(By.ID, "submit").click()
    panels = browser.find_elements(By.CSS_SELECTOR, "#panels .panel")
    wait.until(
        lambda page: all(len(p.find_elements(By.CSS_SELECTOR, ".line")) == 2 for p in panels)
    )
    wait.until(lambda page: all(p.find_elements(By.CSS_SELECTOR, "td.cell") for p in panels))
    assert browser.find_element(By.ID, "error").text == ""
    assert [p.get_attribute("data-model") for p in panels] == ["best", "early", "both"]
    for panel in panels:
        name = panel.get_attribute("data-model")
        body = {
            "text": lines,
            "beam_size": 5,
            "n_best": 3,
            "attention": True,
            "split_sentences": True,
            "model": name,
        }
        expected = models_service.translate(body)[1]["translations"]
        blocks = panel.find_elements(By.CSS_SELECTOR, ".line")
        shown = [b.find_element(By.CSS_SELECTOR, ".translation").text for b in blocks]
        assert shown == [p["text"] for p in expected] and all(shown)
        for block, paragraph in zip(blocks, expected, strict=True):
            sentences = block.find_elements(By.CSS_SELECTOR, ".sentence")
            assert len(sentences) == len(paragraph["sentences"])
            for shown_sentence, sentence in zip(sentences, paragraph["sentences"], strict=True):
                sources = shown_sentence.find_elements(By.CSS_SELECTOR, ".heatmap thead th")[1:]
                assert [th.text for th in sources] == sentence["source_pieces"]
                items = shown_sentence.find_elements(By.CSS_SELECTOR, ".nbest-list li")
                assert len(items) == len(sentence["hypotheses"])
        headings = blocks[0].find_elements(By.CSS_SELECTOR, ".sentence-source")
        assert [h.text.split(" → ")[0] for h in headings] == ["我很好。", "你好！"]
    ARTIFACTS.mkdir(exist_ok=True)
    assert browser.save_screenshot(str(ARTIFACTS / "serve_page_paragraphs.png"))
