"""The web console in a real Chromium, driven headless by Selenium.

Run by ConsoleBrowserTests.swift against a `ferry serve` it started. Every check raises on failure; each passed
behaviour prints `PASS <name>`; screenshots of each page go to ARTIFACTS.

Environment: FERRY_ENDPOINT, ROOT_ID, ROOT_SECRET, SCOPED_ID, SCOPED_SECRET, CLIP (a short playable video),
BIG (a file of several 5 MiB parts), ARTIFACTS (a directory), SERVER_PID (the process id of `ferry serve`).
"""

import json
import os
import sys
import time
import urllib.request

import boto3
from botocore.config import Config
from selenium import webdriver
from selenium.common.exceptions import NoAlertPresentException, WebDriverException
from selenium.webdriver.common.action_chains import ActionChains
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys

ENDPOINT = os.environ["FERRY_ENDPOINT"]
ARTIFACTS = os.environ["ARTIFACTS"]
CONSOLE = ENDPOINT + "/console/"
XSS = "<img src=x onerror=alert(1)>"


def passed(name):
    print("PASS " + name, flush=True)


def wait(driver, condition, timeout=30, message="condition"):
    """Polls `condition(driver)` until it returns a true value; returns it."""
    deadline = time.time() + timeout
    last_error = None
    while time.time() < deadline:
        try:
            value = condition(driver)
            if value:
                return value
        except (WebDriverException, AttributeError, TypeError, ValueError) as error:  # not there yet, or replaced
            last_error = error
        time.sleep(0.2)
    raise AssertionError(f"timed out after {timeout} s waiting for {message} (last error: {last_error}); "
                         f"page: {driver.current_url} {driver.find_element(By.TAG_NAME, 'body').text[:800]!r}")


def shot(driver, name):
    driver.save_screenshot(os.path.join(ARTIFACTS, name + ".png"))


def js(driver, script, *args):
    return driver.execute_script(script, *args)


def unlabelled_fields(driver):
    """Visible form fields without a label or an accessible name."""
    return js(driver, """
        return [...document.querySelectorAll('input, select, textarea')]
          .filter((e) => e.type !== 'hidden' && e.offsetParent !== null || e.id === 'file-input')
          .filter((e) => !(e.labels && e.labels.length) && !e.getAttribute('aria-label'))
          .map((e) => e.id || e.name || e.outerHTML.slice(0, 80));""")


def check_accessible(driver, page):
    fields = unlabelled_fields(driver)
    assert not fields, f"{page}: fields without a label: {fields}"
    images = js(driver, "return [...document.images].filter((i) => !i.hasAttribute('alt')).length")
    assert images == 0, f"{page}: images without alt text"


def sign_in(driver, key_id, secret):
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), message="the sign-in form")
    field = driver.find_element(By.ID, "access-key-id")
    field.clear()
    field.send_keys(key_id)
    secret_field = driver.find_element(By.ID, "secret-access-key")
    secret_field.clear()
    secret_field.send_keys(secret)
    secret_field.send_keys(Keys.ENTER)


def no_alert(driver):
    try:
        driver.switch_to.alert
    except NoAlertPresentException:
        return True
    return False


def upload_row(driver, name):
    rows = driver.find_elements(By.CSS_SELECTOR, f'#upload-list li[data-file="{name}"]')
    return rows[0] if rows else None


def throttle(driver, bytes_per_second):
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": False, "latency": 2, "downloadThroughput": -1 if bytes_per_second is None else bytes_per_second,
        "uploadThroughput": -1 if bytes_per_second is None else bytes_per_second})


def start_slow_upload(driver, big, label, rotation):
    """Uploads a copy of `big` turned by 1/`rotation` of its length (other bytes: another file) over a link throttled
    to 2 MiB/s, and waits until a part of it is sent; returns its path and file name."""
    path = big + "." + label + ".mp4"
    with open(big, "rb") as source, open(path, "wb") as target:
        data = source.read()
        target.write(data[len(data) // rotation:] + data[:len(data) // rotation])
    name = os.path.basename(path)
    throttle(driver, 2 * 1024 * 1024)
    driver.find_element(By.ID, "file-input").send_keys(path)
    wait(driver, lambda d: int(upload_row(d, name).get_attribute("data-sent-parts") or 0) >= 1, timeout=60,
         message="a part of the " + label + " file")
    return path, name


def media_api(driver, action, body):
    """Calls the console API from the page, as the signed-in session."""
    return driver.execute_async_script("""
        const [action, body, done] = arguments;
        (async () => {
          // The session's token, as the console keeps it: in its origin's storage (the service describes a session
          // only to a page that sends it).
          const token = localStorage.getItem('ferry.console.csrf');
          const reply = await fetch('/_ferry/console/api/' + action, {method: 'POST', body: JSON.stringify(body),
            headers: {'Content-Type': 'application/json', 'X-Ferry-CSRF': token}});
          return {status: reply.status, body: await reply.json()};
        })().then(done, (error) => done({status: -1, body: String(error)}));""", action, body)


def main():
    options = Options()
    for argument in ["--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,900",
                     "--autoplay-policy=no-user-gesture-required", "--mute-audio", "--disable-gpu"]:
        options.add_argument(argument)
    options.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    service = Service(executable_path=os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
    driver = webdriver.Chrome(options=options, service=service)
    driver.set_script_timeout(30)
    try:
        run(driver)
    finally:
        logs = []
        try:
            logs = driver.get_log("browser")
        except WebDriverException:
            pass
        with open(os.path.join(ARTIFACTS, "browser-console.log"), "w") as log:
            for entry in logs:
                log.write(json.dumps(entry) + "\n")
        driver.quit()


def run(driver):
    clip = os.environ["CLIP"]
    clip_name = os.path.basename(clip)
    big = os.environ["BIG"]
    big_name = os.path.basename(big)

    # Sign in: a wrong secret is refused with a message; the right one opens the library.
    driver.get(CONSOLE)
    sign_in(driver, os.environ["ROOT_ID"], "wrong-secret")
    wait(driver, lambda d: "wrong" in d.find_element(By.ID, "sign-in-error").text, message="the wrong-key message")
    check_accessible(driver, "sign-in")
    shot(driver, "sign-in")
    sign_in(driver, os.environ["ROOT_ID"], os.environ["ROOT_SECRET"])
    wait(driver, lambda d: d.find_element(By.ID, "library-summary").text != "", message="the library")
    cookie = driver.get_cookie("ferry_console")
    assert cookie and cookie["httpOnly"] and cookie.get("sameSite") == "Strict", cookie
    assert js(driver, "return document.cookie") == "", "the session cookie is readable by scripts"
    storage = js(driver, "return JSON.stringify(localStorage) + JSON.stringify(sessionStorage)")
    assert os.environ["ROOT_SECRET"] not in storage, "the secret is stored in the browser"
    # The cookie alone is not the page's session: without the token this origin keeps, it is not described.
    described = driver.execute_async_script(
        "const done = arguments[0];"
        "fetch('/_ferry/console/session').then((r) => done(r.status), () => done(-1));")
    assert described == 401, f"the session was described to a request without the page's token: {described}"
    passed("sign in")

    # An object an uploader stored as HTML, opened in the signed-in browser (a link to it, presigned): its script must
    # not run as the console's origin, where it could read the session's CSRF token and act as root.
    s3 = boto3.client("s3", endpoint_url=ENDPOINT, region_name="us-east-1",
                      aws_access_key_id=os.environ["ROOT_ID"], aws_secret_access_key=os.environ["ROOT_SECRET"],
                      config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
    s3.create_bucket(Bucket="pages")
    page = ("<html><head><title>stored</title></head><body><script>"
            "fetch('/_ferry/console/session').then((r) => r.json())"
            ".then((s) => { document.title = 'STOLE ' + s.CSRFToken; }, (e) => { document.title = 'REFUSED'; });"
            "</script></body></html>")
    s3.put_object(Bucket="pages", Key="evil.html", Body=page.encode(), ContentType="text/html")
    driver.get(s3.generate_presigned_url("get_object", Params={"Bucket": "pages", "Key": "evil.html"}))
    time.sleep(2)
    title = js(driver, "return document.title")
    assert not title.startswith("STOLE"), "a stored page read the console session"
    assert title == "stored", f"the stored page's script ran: {title!r}"
    assert js(driver, "return window.origin") == "null", "the stored page has the console's origin"
    driver.get(CONSOLE)
    wait(driver, lambda d: d.find_element(By.ID, "library-summary").text != "", message="the library again")
    passed("a stored page runs no script as the console's origin")

    # Upload a clip through the file input: the progress bar reaches 100 %, then the video becomes Normal.
    driver.get(CONSOLE + "#/upload")
    wait(driver, lambda d: d.find_element(By.ID, "file-input"), message="the upload page")
    check_accessible(driver, "upload")
    driver.find_element(By.ID, "file-input").send_keys(clip)
    row = wait(driver, lambda d: upload_row(d, clip_name), message="the upload row")
    wait(driver, lambda d: upload_row(d, clip_name).get_attribute("data-percent") == "100", message="100 %")
    bar = upload_row(driver, clip_name).find_element(By.TAG_NAME, "progress")
    assert bar.get_attribute("value") == "100", bar.get_attribute("value")
    passed("upload reaches 100 %")
    wait(driver, lambda d: upload_row(d, clip_name).get_attribute("data-status") == "Normal", timeout=240,
         message="the video to become Normal")
    video_id = upload_row(driver, clip_name).get_attribute("data-video-id")
    shot(driver, "upload")
    passed("status becomes Normal")

    # The library shows it with its cover, title, duration and status.
    driver.get(CONSOLE + "#/library")
    card = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'li[data-video-id="{video_id}"]'), message="the card")[0]
    assert card.get_attribute("data-status") == "Normal"
    wait(driver, lambda d: js(d, "const i = document.querySelector(arguments[0]); return i && i.complete && i.naturalWidth > 0",
                              f'li[data-video-id="{video_id}"] img'), message="the cover thumbnail")
    check_accessible(driver, "library")
    shot(driver, "library")
    passed("library lists the video with its cover")

    # Its page plays it: the video element's currentTime advances.
    card.find_element(By.CSS_SELECTOR, "a.title").click()
    player = wait(driver, lambda d: d.find_element(By.ID, "player"), message="the player")
    started = js(driver, "const v = document.getElementById('player'); v.muted = true; return v.play().then(() => 'ok', (e) => String(e));")
    assert started == "ok", f"play() failed: {started} ({player.get_attribute('src')})"
    wait(driver, lambda d: js(d, "return document.getElementById('player').currentTime") > 0.5, message="playback to advance")
    rows = driver.find_elements(By.CSS_SELECTOR, "#renditions tbody tr")
    assert len(rows) >= 1, "no renditions listed"
    check_accessible(driver, "video")
    js(driver, "document.getElementById('player').pause()")
    shot(driver, "video")
    passed("video plays")

    # Browsers that play no HLS themselves (Firefox, older Chrome) get the console's player on Media Source Extensions:
    # the same master playlist, the picture and the sound from their own playlists, a seek fetched from where it lands.
    play = media_api(driver, "GetPlayInfo", {"VideoId": video_id, "Formats": "m3u8"})
    assert play["status"] == 200, f"GetPlayInfo answered {play}"
    master = next(s["PlayURL"] for s in play["body"]["PlayInfoList"] if s["Definition"] == "AUTO")
    # Every first segment is refused at first (a network that drops at the start): the player says so, and tries again.
    driver.execute_cdp_cmd("Network.enable", {})
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*seg_00000.m4s*"]})
    driver.set_script_timeout(60)
    until = """
        const until = (test, what) => new Promise((resolve, reject) => {
          const started = Date.now();
          const tick = () => test() ? resolve()
            : Date.now() - started > 20000 ? reject(new Error(what + ' timed out at ' + window.__mse.video.currentTime)) : setTimeout(tick, 100);
          tick();
        });"""
    reported = driver.execute_async_script(until + """
        const [url, done] = arguments;
        (async () => {
          const player = await import(new URL('stream-player.js', location.href).href);
          const tracks = await player.readMaster(url);
          if (!tracks) return 'no variant plays here';
          const video = document.createElement('video');
          video.muted = true;
          document.body.append(video);
          const problems = [];
          const stop = player.attachStream(video, url, tracks, (message) => { if (message) problems.push(message); });
          window.__mse = { video, stop, tracks, problems };
          video.play().catch(() => {});
          await until(() => problems.length > 0, 'a problem to be reported');
          return problems[0];
        })().then(done, (error) => done(String(error)));""", master)
    assert "could not be fetched" in reported, f"the refused segment was reported as {reported!r}"
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    outcome = driver.execute_async_script(until + """
        const done = arguments[arguments.length - 1];
        (async () => {
          const { video, stop, tracks } = window.__mse;
          await until(() => video.currentTime > 0.5, 'playback once the segment comes');
          const engine = video.src.startsWith('blob:');
          video.currentTime = Math.max(0, video.duration - 1.2);
          await until(() => !video.seeking && video.currentTime > video.duration - 1.3, 'the seek');
          stop();
          video.remove();
          return `ok ${tracks.map((t) => t.codecs.join('+')).join(' ')} ${engine}`;
        })().then(done, (error) => done(String(error)));""")
    assert outcome.startswith("ok ") and outcome.endswith(" true"), f"through Media Source Extensions: {outcome}"
    print("  streams:", outcome)
    passed("HLS plays through Media Source Extensions")

    # A longer video plays on its page within seconds of its upload, from its first stream, while the ladder is still
    # being made; the page follows its status and keeps playing.
    long_clip = os.environ["LONG_CLIP"]
    long_name = os.path.basename(long_clip)
    driver.get(CONSOLE + "#/upload")
    wait(driver, lambda d: d.find_element(By.ID, "file-input"), message="the upload page")
    driver.find_element(By.ID, "file-input").send_keys(long_clip)
    long_id = wait(driver, lambda d: (upload_row(d, long_name) or None) and upload_row(d, long_name).get_attribute("data-video-id"),
                   message="the long video's id")
    uploaded = time.time()
    driver.get(CONSOLE + f"#/videos/{long_id}")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "video#player"), timeout=120, message="the first stream's player")
    status = driver.find_element(By.ID, "video-status").get_attribute("class")
    assert "status-Transcoding" in status, f"the player came with {status}, not while Transcoding"
    js(driver, "const v = document.getElementById('player'); v.muted = true; v.play();")
    wait(driver, lambda d: js(d, "return document.getElementById('player').currentTime") > 1.0, message="the first stream to play")
    first = js(driver, "return [document.getElementById('video-status').className, document.getElementById('player').dataset.format].join(' ')")
    assert "status-Transcoding" in first and first.endswith(" m3u8"), f"played as {first}"
    print(f"  first stream playing {time.time() - uploaded:.1f} s after the upload")
    # Polls keep this player (the same element, its position going on), and what is typed into the form, until the
    # ladder replaces the player at the same moment; a poll that fails leaves both and says so.
    js(driver, "document.getElementById('player').dataset.mark = 'kept'")
    title_field = driver.find_element(By.ID, "edit-video-title")
    title_field.clear()
    title_field.send_keys("typed while it plays")
    position = js(driver, "return document.getElementById('player').currentTime")
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": ["*/GetVideoInfo*"]})
    wait(driver, lambda d: "Could not refresh" in d.find_element(By.ID, "refresh-note").text, message="the failed poll's note")
    time.sleep(2.5)
    during = js(driver, "const v = document.getElementById('player'); return [v.dataset.mark || '', v.currentTime]")
    driver.execute_cdp_cmd("Network.setBlockedURLs", {"urls": []})
    assert during[0] == "kept" and during[1] > position, f"a failed poll took the player: {position} then {during}"
    wait(driver, lambda d: d.find_element(By.ID, "refresh-note").text == "", message="the note to clear")
    later = js(driver, "const v = document.getElementById('player'); return [v.dataset.mark || '', document.getElementById('video-status').className]")
    assert later[0] == "kept" or "status-Normal" in later[1], f"the player was made again while Transcoding: {later}"
    wait(driver, lambda d: "status-Normal" in d.find_element(By.ID, "video-status").get_attribute("class"), timeout=300,
         message="the long video to become Normal")
    print(f"  ladder published {time.time() - uploaded:.1f} s after the upload")
    typed = driver.find_element(By.ID, "edit-video-title").get_attribute("value")
    assert typed == "typed while it plays", f"the form lost what was typed: {typed!r}"
    wait(driver, lambda d: js(d, "const v = document.getElementById('player'); return v && v.currentTime > 2"),
         message="the ladder to play on")
    js(driver, "document.getElementById('player').pause()")
    passed("a video plays while it is transcoded")
    driver.get(CONSOLE + f"#/videos/{video_id}")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "video#player"), message="the first video's player again")

    # A subtitle track added through the API plays as a track of the player: its cue shows at its time.
    added = media_api(driver, "AddSubtitle", {"VideoId": video_id, "Language": "en", "Name": "English", "Default": True,
                                              "Content": "1\n00:00:00,000 --> 00:00:30,000\nHello from the captions\n"})
    assert added["status"] == 200, f"AddSubtitle answered {added}"
    driver.refresh()
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#player track"), message="the player's subtitle track")
    track = driver.find_element(By.CSS_SELECTOR, "#player track")
    assert track.get_attribute("srclang") == "en" and track.get_attribute("label") == "English"
    js(driver, "const v = document.getElementById('player'); v.muted = true; v.textTracks[0].mode = 'showing'; v.currentTime = 1;")
    wait(driver, lambda d: js(d, "const t = document.getElementById('player').textTracks[0]; "
                                 "return t.cues && t.cues.length > 0 && t.activeCues && t.activeCues.length > 0 "
                                 "&& t.activeCues[0].text === 'Hello from the captions'"),
         message="the caption cue to be active")
    shot(driver, "video-captions")
    passed("captions show as a track of the player")
    # The timeline under the player previews the storyboard: hovering over its middle shows the tile of that moment,
    # the sprite's part named by the cue's #xywh fragment, and the sprite itself loads.
    bar = wait(driver, lambda d: d.find_element(By.ID, "scrub-bar"), message="the storyboard timeline")
    wait(driver, lambda d: int(d.find_element(By.ID, "scrub-bar").get_attribute("data-cues") or "0") >= 3,
         message="the storyboard cues")
    ActionChains(driver).move_to_element(bar).perform()  # its centre: 1.5 s of the 3 s clip
    preview = wait(driver, lambda d: d.find_element(By.ID, "scrub-preview").is_displayed()
                   and d.find_element(By.ID, "scrub-preview"), message="the scrub preview")
    tile = js(driver, """
        const tile = document.getElementById('scrub-tile'); const style = getComputedStyle(tile);
        return { image: style.backgroundImage, position: style.backgroundPosition, width: tile.offsetWidth,
                 start: document.getElementById('scrub-preview').dataset.start };""")
    assert "storyboard.jpg" in tile["image"], tile
    assert float(tile["start"]) >= 1.0, tile
    assert tile["position"] != "0px 0px", tile
    loaded = js(driver, """
        const url = getComputedStyle(document.getElementById('scrub-tile')).backgroundImage.slice(5, -2);
        return new Promise((done) => { const image = new Image(); image.onload = () => done(image.naturalWidth);
                                       image.onerror = () => done(0); image.src = url; });""")
    assert loaded >= 160 * 3, f"the sprite is {loaded} pixels wide"
    shot(driver, "video-storyboard")
    ActionChains(driver).move_to_element(driver.find_element(By.ID, "video-title")).perform()
    wait(driver, lambda d: not d.find_element(By.ID, "scrub-preview").is_displayed(), message="the preview to hide")
    passed("storyboard previews on the timeline")

    # Edit the title to markup: it shows as those characters and nothing runs.
    title = driver.find_element(By.ID, "edit-video-title")
    title.clear()
    title.send_keys(XSS)
    driver.find_element(By.ID, "save-video").click()
    wait(driver, lambda d: d.find_element(By.ID, "video-title").text == XSS, message="the new title")
    assert not driver.find_elements(By.CSS_SELECTOR, "#video-title img"), "the title became markup"
    driver.get(CONSOLE + "#/library")
    wait(driver, lambda d: any(e.text == XSS for e in d.find_elements(By.CSS_SELECTOR, ".video-card .title")),
         message="the title in the library")
    assert not driver.find_elements(By.CSS_SELECTOR, ".video-card .title img")
    time.sleep(0.5)
    assert no_alert(driver), "a script in the title ran"
    passed("edit title")

    # A cover the app set on another site is not loaded (the console's Content-Security-Policy would refuse it): the
    # video page links to it, the library says where it is, and the player has no poster; cleared, the video's own
    # cover shows again.
    elsewhere = "https://covers.invalid/c.jpg"
    assert media_api(driver, "UpdateVideoInfo", {"VideoId": video_id, "CoverURL": elsewhere})["status"] == 200
    driver.get(CONSOLE + f"#/videos/{video_id}")
    cover = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "p#cover a"), message="the cover link")[0]
    assert cover.get_attribute("href") == elsewhere and cover.get_attribute("rel") == "noopener noreferrer", cover.get_attribute("outerHTML")
    assert not [e for e in driver.find_elements(By.TAG_NAME, "img") if "covers.invalid" in (e.get_attribute("src") or "")]
    assert "covers.invalid" not in (driver.find_element(By.ID, "player").get_attribute("poster") or "")
    driver.get(CONSOLE + "#/library")
    card = wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'li[data-video-id="{video_id}"] .cover-placeholder'),
                message="the card without the foreign cover")[0]
    assert card.text == "Cover elsewhere", card.text
    assert media_api(driver, "UpdateVideoInfo", {"VideoId": video_id, "CoverURL": ""})["status"] == 200
    driver.get(CONSOLE + f"#/videos/{video_id}")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "img#cover"), message="the video's own cover again")
    passed("a cover on another site is a link, not loaded")
    passed("title with markup renders as text")

    # Reload mid-upload: the parts already stored are not sent again.
    driver.get(CONSOLE + "#/upload")
    throttle(driver, 3 * 1024 * 1024)
    driver.find_element(By.ID, "file-input").send_keys(big)
    wait(driver, lambda d: int(upload_row(d, big_name).get_attribute("data-sent-parts") or 0) >= 2, timeout=60,
         message="two parts stored")
    parts = int(upload_row(driver, big_name).get_attribute("data-part-count"))
    driver.refresh()
    throttle(driver, None)
    driver.get(CONSOLE + "#/upload")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'#unfinished li[data-file="{big_name}"]'),
         message="the unfinished upload after the reload")
    shot(driver, "upload-unfinished")
    driver.find_element(By.ID, "file-input").send_keys(big)
    wait(driver, lambda d: upload_row(d, big_name).get_attribute("data-state") in ("processing", "done"), timeout=60,
         message="the resumed upload to finish")
    row = upload_row(driver, big_name)
    skipped = int(row.get_attribute("data-skipped-parts"))
    sent = int(row.get_attribute("data-sent-parts"))
    assert skipped >= 2 and skipped + sent == parts, f"skipped {skipped}, sent {sent}, of {parts}"
    big_video = row.get_attribute("data-video-id")
    info = media_api(driver, "GetVideoInfo", {"VideoId": big_video})
    assert info["body"]["Video"]["Size"] == os.path.getsize(big), info
    passed("reload mid-upload resumes without re-sending stored parts")

    # An expired session returns to sign-in; the upload in progress waits and then finishes.
    throttle(driver, 3 * 1024 * 1024)
    second = big + ".again.mp4"
    with open(big, "rb") as source, open(second, "wb") as target:
        target.write(source.read()[::-1])
    second_name = os.path.basename(second)
    driver.find_element(By.ID, "file-input").send_keys(second)
    wait(driver, lambda d: int(upload_row(d, second_name).get_attribute("data-sent-parts") or 0) >= 1, timeout=60,
         message="a part of the second file")
    driver.delete_cookie("ferry_console")
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), message="sign-in after the session ended")
    shot(driver, "session-ended")
    reason = driver.find_element(By.ID, "sign-in-reason").text
    assert "upload" in reason, f"the sign-in form does not mention the waiting upload: {reason!r}"
    throttle(driver, None)
    sign_in(driver, os.environ["ROOT_ID"], os.environ["ROOT_SECRET"])
    driver.get(CONSOLE + "#/upload")
    wait(driver, lambda d: upload_row(d, second_name).get_attribute("data-state") in ("processing", "done"), timeout=60,
         message="the upload held over sign-in to finish")
    row = upload_row(driver, second_name)
    assert int(row.get_attribute("data-sent-parts")) == int(row.get_attribute("data-part-count")), row.get_attribute("outerHTML")
    passed("expired session keeps the upload")

    # Pause, resume and cancel; a network that drops for a few seconds costs retries, not the upload.
    third, third_name = start_slow_upload(driver, big, "third", 2)
    upload_row(driver, third_name).find_element(By.CSS_SELECTOR, "button.pause").click()
    wait(driver, lambda d: upload_row(d, third_name).get_attribute("data-state") == "paused", message="paused")
    paused_at = int(upload_row(driver, third_name).get_attribute("data-sent-parts"))
    time.sleep(1.5)
    assert int(upload_row(driver, third_name).get_attribute("data-sent-parts")) == paused_at, "parts went on while paused"
    upload_row(driver, third_name).find_element(By.CSS_SELECTOR, "button.resume").click()
    wait(driver, lambda d: int(upload_row(d, third_name).get_attribute("data-sent-parts")) > paused_at, timeout=60,
         message="parts after resuming")
    driver.execute_cdp_cmd("Network.emulateNetworkConditions", {
        "offline": True, "latency": 0, "downloadThroughput": -1, "uploadThroughput": -1})
    time.sleep(3)
    throttle(driver, None)
    wait(driver, lambda d: upload_row(d, third_name).get_attribute("data-state") in ("processing", "done"), timeout=90,
         message="the upload to finish after the network came back")
    third_video = upload_row(driver, third_name).get_attribute("data-video-id")
    info = media_api(driver, "GetVideoInfo", {"VideoId": third_video})
    assert info["body"]["Video"]["Size"] == os.path.getsize(third), info
    passed("pause, resume and a dropped network")

    fourth = big + ".fourth.mp4"
    with open(third, "rb") as source, open(fourth, "wb") as target:
        target.write(source.read()[::-1])
    fourth_name = os.path.basename(fourth)
    throttle(driver, 2 * 1024 * 1024)
    driver.find_element(By.ID, "file-input").send_keys(fourth)
    wait(driver, lambda d: upload_row(d, fourth_name).get_attribute("data-video-id"), timeout=60, message="the fourth video")
    fourth_video = upload_row(driver, fourth_name).get_attribute("data-video-id")
    upload_row(driver, fourth_name).find_element(By.CSS_SELECTOR, "button.cancel").click()
    wait(driver, lambda d: upload_row(d, fourth_name).get_attribute("data-state") == "cancelled", message="cancelled")
    throttle(driver, None)
    wait(driver, lambda d: media_api(d, "GetVideoInfo", {"VideoId": fourth_video})["status"] == 404, timeout=30,
         message="the cancelled video to be gone")
    # A cancelled image goes too.
    picture = big + ".picture.png"
    with open(third, "rb") as source, open(picture, "wb") as target:
        target.write(source.read())
    picture_name = os.path.basename(picture)
    throttle(driver, 2 * 1024 * 1024)
    driver.find_element(By.ID, "file-input").send_keys(picture)
    wait(driver, lambda d: int(upload_row(d, picture_name).get_attribute("data-sent-parts") or 0) >= 1, timeout=60,
         message="a part of the picture")
    picture_id = upload_row(driver, picture_name).get_attribute("data-image-id")
    assert picture_id, "the picture's upload row names no image"
    upload_row(driver, picture_name).find_element(By.CSS_SELECTOR, "button.cancel").click()
    wait(driver, lambda d: upload_row(d, picture_name).get_attribute("data-state") == "cancelled", message="cancelled picture")
    throttle(driver, None)
    wait(driver, lambda d: media_api(d, "GetImageInfo", {"ImageId": picture_id})["status"] == 404, timeout=30,
         message="the cancelled image to be gone")
    passed("cancel")

    # Delete, after confirming.
    driver.get(CONSOLE + f"#/videos/{big_video}")
    wait(driver, lambda d: d.find_element(By.ID, "delete-video"), message="the video page").click()
    wait(driver, lambda d: d.find_element(By.ID, "confirm-yes"), message="the confirmation").click()
    wait(driver, lambda d: d.current_url.endswith("#/library"), message="back to the library")
    assert media_api(driver, "GetVideoInfo", {"VideoId": big_video})["status"] == 404
    passed("delete")

    # Keys: a new secret shows once; the key list never shows it.
    driver.get(CONSOLE + "#/keys")
    wait(driver, lambda d: d.find_element(By.ID, "create-key"), message="the keys page")
    driver.find_element(By.ID, "key-description").send_keys("from the browser test")
    driver.find_element(By.CSS_SELECTOR, "#create-key button[type=submit]").click()
    secret = wait(driver, lambda d: d.find_element(By.ID, "new-key-secret").text, message="the new secret")
    new_id = driver.find_element(By.ID, "new-key-id").text
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-key-id="{new_id}"]'), message="the key in the list")
    # Each key's usage against its quota (GetUsage), in its row.
    usage_cell = f'td[data-usage-of="{new_id}"]'
    usage = wait(
        driver, lambda d: "bytes" in d.find_element(By.CSS_SELECTOR, usage_cell).text and d.find_element(By.CSS_SELECTOR, usage_cell).text,
        message="the key's usage")
    assert usage == "0 bytes · 0 videos · 0 uploads in progress", usage
    check_accessible(driver, "keys")
    shot(driver, "keys")
    driver.get(CONSOLE + "#/library")
    driver.get(CONSOLE + "#/keys")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, f'tr[data-key-id="{new_id}"]'), message="the key list again")
    assert secret not in driver.find_element(By.TAG_NAME, "body").text, "the secret is shown after its creation"
    passed("keys page shows a secret once")

    driver.get(CONSOLE + "#/webhooks")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, "#webhook-list tr[data-event-id]"), message="webhook events")
    shot(driver, "webhooks")
    passed("webhooks page lists deliveries")

    # Status: this node (its name carries the server's process id) is listed, running, with the catalog answering.
    driver.get(CONSOLE + "#/status")
    pid = os.environ["SERVER_PID"]
    row = wait(driver, lambda d: [r for r in d.find_elements(By.CSS_SELECTOR, "#node-list tr[data-node]")
                                  if f"-{pid}-" in r.get_attribute("data-node")], message="this node in the status")[0]
    assert row.get_attribute("data-role") == "all", row.get_attribute("data-role")
    assert row.get_attribute("data-stale") == "false"
    catalog = driver.find_element(By.CSS_SELECTOR, '#status-summary tr[data-fact="Catalog"] td').text
    assert catalog.startswith("Answering"), catalog
    jobs = driver.find_element(By.CSS_SELECTOR, '#status-summary tr[data-fact="Media jobs"] td').text
    assert " queued, " in jobs and " scheduled, " in jobs and " running, " in jobs, jobs
    assert driver.find_elements(By.CSS_SELECTOR, '#status-summary tr[data-fact="Disk free"]')
    check_accessible(driver, "status")
    shot(driver, "status")
    passed("status page lists this node")

    # A narrow window: nothing scrolls sideways.
    driver.set_window_size(390, 844)
    driver.get(CONSOLE + "#/library")
    wait(driver, lambda d: d.find_elements(By.CSS_SELECTOR, ".video-card"), message="the narrow library")
    wide = js(driver, "return document.documentElement.scrollWidth - window.innerWidth")
    assert wide <= 1, f"the page is {wide} px wider than a narrow window"
    shot(driver, "library-narrow")
    driver.set_window_size(1280, 900)
    passed("narrow window")

    # An upload left unfinished at sign-out stays the root key's: the next key on this browser neither lists nor resumes it.
    driver.get(CONSOLE + "#/upload")
    wait(driver, lambda d: d.find_element(By.ID, "file-input"), message="the upload page")
    _, fifth_name = start_slow_upload(driver, big, "fifth", 3)
    throttle(driver, None)

    # The library's filters are the key's own: set here, they are gone for the next key.
    driver.get(CONSOLE + "#/library")
    title_filter = wait(driver, lambda d: d.find_element(By.ID, "filter-title"), message="the library's filters")
    title_filter.send_keys("confidential-project")
    title_filter.send_keys(Keys.ENTER)
    wait(driver, lambda d: d.find_element(By.ID, "library-summary").text == "No videos match.", message="the filtered library")

    # A scoped key sees only its own videos.
    driver.find_element(By.ID, "sign-out").click()
    sign_in(driver, os.environ["SCOPED_ID"], os.environ["SCOPED_SECRET"])
    wait(driver, lambda d: not d.find_element(By.ID, "sign-in").is_displayed(), message="the scoped key's session")
    driver.get(CONSOLE + "#/upload")
    wait(driver, lambda d: d.find_element(By.ID, "file-input"), message="the scoped key's upload page")
    time.sleep(1)
    assert fifth_name not in driver.find_element(By.TAG_NAME, "body").text, "another key's upload is shown"
    passed("another key's unfinished upload is not shown")
    driver.get(CONSOLE + "#/library")
    summary = wait(driver, lambda d: d.find_element(By.ID, "library-summary").text, message="the scoped library")
    assert summary == "No videos match.", summary
    assert not driver.find_element(By.ID, "nav-keys").is_displayed()
    assert not driver.find_element(By.ID, "nav-status").is_displayed()
    assert media_api(driver, "GetServiceStatus", {})["status"] == 403
    assert media_api(driver, "GetVideoInfo", {"VideoId": video_id})["status"] == 403
    assert driver.find_element(By.ID, "filter-title").get_attribute("value") == "", "the root key's filter is shown"
    passed("scoped key sees only its own videos")

    # A right-to-left override in a title shows as its code point, not as reordered text (gnp.exe as exe.png).
    assert media_api(driver, "CreateUploadVideo", {"Title": "\u202egnp.exe", "FileName": "s.mp4"})["status"] == 200
    driver.get(CONSOLE + "#/library")
    card = wait(driver, lambda d: [c for c in d.find_elements(By.CSS_SELECTOR, ".video-card .title") if "gnp.exe" in c.text],
                message="the titled video")[0]
    assert card.text == "<U+202E>gnp.exe", repr(card.text)
    passed("bidirectional controls show as code points")

    # Two tabs share the session cookie: one that signs in as another key, or out, changes what the other shows.
    first = driver.current_window_handle
    driver.switch_to.new_window("tab")
    driver.get(CONSOLE + "#/library")
    wait(driver, lambda d: d.find_element(By.ID, "sign-out").is_displayed(), message="the second tab's session")
    driver.find_element(By.ID, "sign-out").click()
    sign_in(driver, os.environ["ROOT_ID"], os.environ["ROOT_SECRET"])
    wait(driver, lambda d: "(root)" in d.find_element(By.ID, "who").text, message="root in the second tab")
    second = driver.current_window_handle
    driver.switch_to.window(first)
    wait(driver, lambda d: d.find_element(By.ID, "who").text == os.environ["ROOT_ID"] + " (root)", timeout=15,
         message="the first tab to show the key it now acts as")
    assert driver.find_element(By.ID, "nav-keys").is_displayed()
    driver.switch_to.window(second)
    driver.find_element(By.ID, "sign-out").click()
    driver.switch_to.window(first)
    wait(driver, lambda d: d.find_element(By.ID, "sign-in").is_displayed(), timeout=15, message="the first tab's sign-in")
    assert "another tab" in driver.find_element(By.ID, "sign-in-reason").text
    driver.switch_to.window(second)
    driver.close()
    driver.switch_to.window(first)
    passed("a session changed in another tab is this tab's too")


if __name__ == "__main__":
    try:
        main()
    except AssertionError as error:
        print(f"FAIL {error}", flush=True)
        sys.exit(1)
