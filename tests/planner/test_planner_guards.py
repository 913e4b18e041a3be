"""General imaging facts and physics guards added in session 6 (issue 39), each on wording of its own.

The sentences below are not any benchmark domain's words: each states the fact in other words, so a
test fails when the fact is lost, not when one description's phrasing changes.
"""

from __future__ import annotations

import pytest

from domainbench.planner import acquisition, cues, plan, rules

CATALOGUE = ["fog", "rain", "snow", "frost", "perspective", "rotation", "cloud_overlay", "motion_blur", "shadow", "low_light",
             "color_shift", "lens_spatter", "lens_distortion", "grid_distortion", "speckle_noise"]


def factors(text: str) -> set[str]:
    return {f.factor for f in acquisition.read(text)}


def chosen(text: str) -> set[str]:
    return {c.name for c in plan(text, provider="offline").corruptions}


def cue_names(text: str) -> set[str]:
    return {h.name for h in cues.find(text)}


@pytest.mark.parametrize(
    ("text", "factor", "corruption"),
    [
        ("Shelves lit by incandescent bulbs.", "tinted_light", "color_shift"),  # filament light is yellow-orange
        ("Feeds sent over LTE from the truck.", "lossy_transmission", "jpeg_compression"),  # a shared digital link
        ("The stream goes blocky now and then.", "lossy_transmission", "jpeg_compression"),  # the 8x8 blocks named
        ("Rail tracks watched across a mirage on hot afternoons.", "air_turbulence", "elastic"),  # hot air bends rays
        ("Rail tracks watched across a mirage on hot afternoons.", "air_turbulence", "gaussian_blur"),
        ("Bread loaves in cellophane on the counter.", "translucent_wrap", "glass_blur"),  # a wrapper scrambles detail
        ("Delivery notes received by telefax.", "bilevel", "posterize"),  # one bit per pixel
        ("Delivery notes received by telefax.", "low_resolution", "pixelate"),  # about 200 x 100 dpi
        ("Pipe welds checked by radiography.", "photon_limited", "shot_noise"),  # few X-ray quanta per pixel
        ("Ledgers photographed as open books on a table.", "bound_pages", "grid_distortion"),  # pages curve to the spine
        ("Footage from bodycams worn by stewards.", "wide_lens", "lens_distortion"),  # worn cameras are wide
        ("A camera in a hot cell full of radioactive sources.", "radiation_hits", "salt_and_pepper"),  # particle hits
        ("Grinding fumes hang round the spindle.", "airborne_particles", "fog"),  # particles in the air veil
        ("Sealed crates pass the camera on a belt.", "moving_subject", "motion_blur"),  # a belt carries them past
        ("Toddlers who will not sit still in the chair.", "moving_subject", "motion_blur"),  # the negation is the fact
        ("The tunnel is filmed with the lights switched off, by IR LEDs.", "dim_light", "low_light"),
        ("A dome camera over the tills.", "cover_near_lens", "gaussian_blur"),  # an out-of-focus cover softens
        ("Wheat fields in 30 m pixels from Landsat.", "low_resolution", "pixelate"),  # metre-scale pixels
        ("Apples spin on rollers as they pass the camera.", "moving_subject", "motion_blur"),  # things going past
        ("The mast bounces in gusts.", "moving_platform", "motion_blur"),  # a mount that moves
        ("Goal-line replays in super slow motion.", "photon_limited", "shot_noise"),  # short exposures, few photons
        ("Trail cameras often have cobwebs across the lens.", "occlusion", "occluder"),
        ("Kiosk cameras see customers in sunglasses and hats.", "occlusion", "occluder"),  # worn over the face
        ("Maps on paper with fold lines, photographed flat.", "bound_pages", "grid_distortion"),  # folds bend lines
        ("Pallets wrapped in stretch film.", "translucent_wrap", "glass_blur"),
        ("Clips from GoPros on the riders' helmets.", "wide_lens", "lens_distortion"),  # a plural brand name
        ("Images from a pill camera swallowed by the patient.", "enclosed_cavity", "low_light"),  # its own LEDs only
        ("Nematodes twitch on the agar.", "moving_subject", "motion_blur"),
        ("Vandals smear paint on the housing.", "lens_contamination", "lens_spatter"),
        ("Photographers cover the marathon finish.", "handheld", "motion_blur"),  # photographers hold their cameras
        ("Stock is counted inside the grain silos.", "dim_light", "low_light"),  # a closed space with no window
        ("An inspection camera dangles on a rope down the well.", "free_rotation", "rotation"),  # it turns as it hangs
        # from the sixth set's misses (held out, scored once, then tuned on)
        ("The crawl space is pitch dark apart from a head torch.", "dim_light", "low_light"),
        ("The rotor kicks up soot inside the flue.", "airborne_particles", "fog"),  # stirred-up particles veil
        ("Insects on a lit screen under a blacklight.", "tinted_light", "color_shift"),  # UV light is violet
        ("Food stands under red awnings at the fair.", "tinted_light", "color_shift"),  # daylight through fabric
        ("Butterflies flutter past the feeder camera.", "moving_subject", "motion_blur"),
        ("The foil runs at 600 m/min under the camera.", "moving_subject", "motion_blur"),  # a line speed
        ("Snails settle on the camera window overnight.", "occlusion", "occluder"),
        ("Infants sleep under a blanket in the cot.", "occlusion", "occluder"),
        ("Watch faces shot right up close on a bench.", "close_range", "defocus_blur"),
        ("A fixed camera 40 metres down beside a pier pile.", "water", "color_shift"),  # a depth below the surface
        ("The outflow carries suspended sediment past the lens.", "turbid_water", "fog"),
        # from the seventh set's misses (held out, scored once, then tuned on)
        ("Swans on the lake are a silhouette against the sunset glare.", "dim_light", "low_light"),
        ("Crop rows under blue LEDs in the grow tent.", "tinted_light", "color_shift"),
        ("Ducts where a biofilm coats the inspection window.", "condensation", "fog"),  # a film on the window veils
        ("Receipts held flat by the cashier's hand hold on the glass.", "hands_in_view", "occluder"),
        ("Shoppers keep stepping in front of the shelf camera.", "occlusion", "occluder"),
        ("Podcast hosts behind their microphones on a webcam.", "occlusion", "occluder"),
        ("Perimeter thermal cameras at 80x60 pixels.", "low_resolution", "pixelate"),
        ("The 400 mm lens shakes on the tripod in gusts.", "moving_platform", "motion_blur"),
        # from the eighth set's misses (held out, scored once, then tuned on)
        ("A lathe chuck at 3,000 rpm filmed through the guard.", "moving_subject", "motion_blur"),
        ("Droplet break-up filmed at 2 microsecond exposures.", "photon_limited", "shot_noise"),
        ("Terahertz scans of parcels at the depot.", "coherent_imaging", "speckle_noise"),
        ("A downward camera lit by an LED ring reads the floor markers.", "lamps", "vignetting"),
        ("AMRs tow trolleys between the assembly cells.", "moving_platform", "motion_blur"),
        # from the ninth set's misses (held out, scored once, then tuned on)
        ("Pebbles roll off the belt and fall through the light curtain.", "moving_subject", "motion_blur"),
        ("Echo frames of the beating heart.", "moving_subject", "motion_blur"),
        ("Dogs jumping for a frisbee in the park.", "moving_subject", "motion_blur"),
        ("Cold-neutron tomography with a low flux at the sample.", "photon_limited", "shot_noise"),
        ("A reactor inspection camera hit by gamma rays.", "radiation_hits", "impulse_noise"),
        ("Drone video over an analogue link that breaks up at range.", "analogue_link", "impulse_noise"),
        ("Dishes photographed under a single bulb in the flat.", "tinted_light", "color_shift"),
        ("Prints developed under a red safelight.", "tinted_light", "color_shift"),
        ("Parts under a pinkish display light.", "tinted_light", "color_shift"),
        ("Posters half torn and stuck over by newer ones.", "occlusion", "occluder"),
        ("A calf keeps smudging the lens with its nose.", "lens_contamination", "lens_spatter"),
        ("Shot blasting pits the cover glass within a month.", "glass", "glass_blur"),
        ("Lobby camera recording at 4CIF.", "low_resolution", "pixelate"),
        # from the tenth set's misses (held out, scored once, then tuned on)
        ("Night shots in a darkened lab.", "dim_light", "low_light"),
        ("Wire leaves the die at 12 m/s.", "moving_subject", "motion_blur"),
        ("Calves run through the gate one by one.", "moving_subject", "motion_blur"),
        ("Spray droplets lit by a pulsed laser sheet.", "coherent_imaging", "speckle_noise"),
        ("Beans held in the palm for a photo.", "close_range", "defocus_blur"),
        ("Hangar lights give a violet glow when the UV-C lamps run.", "tinted_light", "color_shift"),
        ("A ballroom under chandeliers.", "tinted_light", "color_shift"),
        ("The camera's housing port gets scratched by sand.", "glass", "glass_blur"),
        ("Time-lapse of coral fragments on a frame.", "water", "color_shift"),
        ("Gallery feed still in SD, upscaled for the web.", "low_resolution", "pixelate"),
        ("Moths spin webs across the lamp housing.", "occlusion", "occluder"),
    ],
)
def test_general_facts_of_session_six(text: str, factor: str, corruption: str) -> None:
    hits = {(h.cue, h.name) for h in acquisition.implied(text)}
    assert (f"acquisition:{factor}", corruption) in hits, sorted(hits)


@pytest.mark.parametrize(
    ("text", "absent"),
    [
        ("Parts are checked for their dimensions.", "dim_light"),  # "dim*" read "dimensions"
        ("A diverse set of parts on a bench.", "water"),  # "diver*" read "diverse"
        ("Licence photos: the applicant holds a driving licence to the camera.", "road_vehicle"),  # a document
        ("Car bodies are inspected on the paint line.", "road_vehicle"),  # a product in a factory
        ("A relay helicopter carries the signal from the race.", "airborne"),  # it relays, it takes no picture
        ("Shoppers' mugs are printed with dark colours.", "dim_light"),  # a thing's colour, not the light
        ("Foot traffic in the mall is counted at the doors.", "road_vehicle"),  # people walking, not a road
        ("A camera in the cabin watches the driver for drowsiness.", "road_vehicle"),  # inside the car
        ("Drones count pallets indoors, flying along the racks.", "airborne"),  # no sky under a roof
        ("Each car is recorded by a camera and a radar.", "coherent_imaging"),  # the radar is another sensor
        ("Cells imaged under bright field illumination.", "sunlit"),  # a microscope's field, not a meadow
    ],
)
def test_words_that_are_no_evidence(text: str, absent: str) -> None:
    assert absent not in factors(text)


def test_skin_and_mistakes_are_no_weather() -> None:
    assert cues.outdoors("Skin lesions photographed in a clinic.") is None  # "ski*" read "skin"
    assert "fog" not in cue_names("Labelling mistakes are common.")  # "mist*" read "mistake"
    assert "frost" not in cue_names("Ice cream tubs behind frosted glass.")
    assert "cloud_overlay" not in cue_names("Photos are backed up to the cloud.")
    assert "vertical_flip" not in cue_names("Parts on a bench under overhead lights.")
    assert "vertical_flip" not in cue_names("Frames grabbed from a slide show.")
    assert "frost" not in cue_names("The feed freezes when the link drops.")
    assert "snow" not in cue_names("Snow crab graded on a processing line.")


def test_sound_and_radio_echoes_have_no_optical_effects() -> None:
    """Sonar, ultrasound and SAR form images from echoes: no fog or weather, no light level, no lens."""
    req = rules.requirements("Side-scan sonar mosaics of a lake bed.", CATALOGUE)
    assert {"fog", "rain", "low_light", "color_shift", "lens_spatter", "lens_distortion"} <= set(req.forbidden)
    assert "speckle_noise" not in req.forbidden and "grid_distortion" not in req.forbidden
    # a sonar beside a camera's pictures: the camera's optics are back
    both = rules.requirements("An ROV with a sonar and a camera in murky water.", CATALOGUE)
    assert "fog" not in both.forbidden and "low_light" not in both.forbidden
    plan_ = chosen("Towfish sonar records of a harbour floor, lines misregistered in the swell.")
    assert "fog" not in plan_ and {"speckle_noise", "grid_distortion"} <= plan_


def test_a_scanner_has_no_perspective_but_may_skew() -> None:
    req = rules.requirements("Invoices fed through a sheet-fed scanner.", CATALOGUE)
    assert "perspective" in req.forbidden
    got = chosen("Contracts fed through an office scanner; pages often go in crooked.")
    assert "rotation" in got and "perspective" not in got
    # a phone photographing a page does see it at a slant
    assert "perspective" not in rules.requirements("Receipts photographed on a desk with a phone.", CATALOGUE).forbidden


def test_radiology_has_no_fog_but_a_fogged_intraoral_window_does() -> None:
    assert {"fog", "lens_distortion"} <= set(rules.requirements("Chest X-rays from the ward.", CATALOGUE).forbidden)
    # medical without radiology: optics that fog up (breath, body heat) are possible
    assert "fog" not in rules.requirements("Dental camera images; the window fogs from breath.", CATALOGUE).forbidden


def test_clouds_need_the_sky_not_the_storage_cloud() -> None:
    assert "cloud_overlay" in rules.unmet_needs("Inspection photos are uploaded to the cloud every night.")
    assert "cloud_overlay" not in rules.unmet_needs("A webcam on the pier watches clouds over the bay.")
    assert "cloud_overlay" not in chosen("A dust cloud surrounds the harvester as it works the field.")


def test_a_rider_or_a_relay_aircraft_shows_no_overhead_view() -> None:
    text = "Marathon coverage from a motorbike camera; a helicopter relays the signal to the studio."
    assert "cloud_overlay" not in chosen(text)
    # an aircraft that does take the pictures still brings its clouds
    assert "cloud_overlay" in chosen("Aerial photos of the marathon route from a helicopter.")


def test_a_kinds_unless_words_and_a_needs_unless_words() -> None:
    """rules.toml's new vetoes: a kind is not detected when one of its ``unless`` words is anywhere in the text
    (unless negated), and a need's keyword is no evidence in a clause holding one of the need's ``unless`` words."""
    echo = next(k for k in rules.rule_book().kinds.values() if k.factors == ["acoustic_imaging"])
    assert "camera*" in echo.unless
    labels = lambda t: {k.label for k in rules.detect_kinds(t)}  # noqa: E731
    assert echo.label in labels("Ultrasound loops of the liver.")
    assert echo.label not in labels("Ultrasound loops of the liver beside photos of the skin.")
    assert echo.label in labels("Ultrasound loops of the liver, without any camera.")  # a negated veto is no veto
    assert "cloud_overlay" in rules.unmet_needs("Point clouds of the hall.")
    assert "cloud_overlay" not in rules.unmet_needs("Point clouds of the hall; outside, clouds over the yard.")


def test_cars_under_a_roof_bring_no_road_weather() -> None:
    """A scene the text puts under a roof (a parking garage, a showroom, indoors) has no road weather or sun
    shadow, even where another clause names the cars."""
    text = "Parking garage cameras read number plates; cars enter at walking pace."
    assert "indoor_scene" in factors(text) and "road_vehicle" not in factors(text)
    assert not {"rain", "shadow"} & chosen(text)
    # a road outside keeps them
    assert {"rain", "shadow"} <= chosen("Cameras read number plates as cars enter the city centre.")


def test_the_similarity_fallback_never_guesses_speckle() -> None:
    """Speckle needs coherent illumination (radar, sonar, ultrasound, a laser): a look-alike situation is no
    evidence of it, so the catalogue-similarity fallback never picks it; a cue or a factor still does."""
    from domainbench.planner import offline
    from domainbench.planner.catalogue import load_catalogue

    planner = offline.OfflinePlanner(load_catalogue().still())
    names = planner.catalogue.names
    reading = offline.Reading({}, "outdoor")
    assert not planner._allowed_semantic(names.index("speckle_noise"), reading)
    assert planner._allowed_semantic(names.index("pixelate"), reading)
    assert "speckle_noise" in chosen("Synthetic aperture radar tiles of sea ice.")


def test_words_that_move_nothing_in_the_picture() -> None:
    """A motion sensor, a speed-up of the work or software that runs is no motion blur; a page under a copy
    stand is photographed square-on (no perspective from the page)."""
    assert "motion_blur" not in cue_names("Lights on motion sensors switch on as staff arrive.")
    assert "motion_blur" not in cue_names("The grading software speeds up the work.")
    assert "motion_blur" in cue_names("Parts speed along the line.")
    assert "page_photographed" not in factors("Documents photographed from a copy stand, straight down.")
    assert "page_photographed" in factors("Documents photographed on a desk.")


def test_live_organisms_under_a_microscope_may_blur() -> None:
    """Microscopy no longer forbids motion blur: a fixed slide does not move, but larvae and swimming cells do;
    the blur comes only from words that say something moves."""
    assert "motion_blur" in chosen("Zebrafish larvae under a microscope twitch suddenly.")
    assert "motion_blur" not in chosen("Stained biopsy slides under a microscope.")
    assert "fog" in cue_names("Tear gas hangs over the square.")


# ---------------------------------------------------------------- after the sixth set (held out, scored once: 63/77,
# 4 impossible picks); each fact below is said in words of its own


def test_a_drone_flies_below_the_clouds() -> None:
    """Small drones fly under the cloud base: looking down they see no clouds over the ground, so the aerial rule
    does not require cloud_overlay and its need is unmet, unless the text puts the sky in view."""
    text = "A quadcopter maps potato rows from 30 m before the harvest."
    assert "low_flying" in factors(text) and "cloud_overlay" in rules.unmet_needs(text)
    assert "cloud_overlay" not in chosen(text)
    assert "cloud_overlay" not in rules.unmet_needs("A drone films the skyline at sunset.")  # the sky named in words
    # aircraft and satellites still bring their clouds
    assert "cloud_overlay" in chosen("Aerial survey photos from a light aircraft at 3,000 m.")


def test_a_lift_car_is_no_road() -> None:
    text = "Cameras in the elevator cars of an office tower."
    assert "road_vehicle" not in factors(text)
    assert not {"rain", "shadow"} & chosen(text)


# ---------------------------------------------------------------- after the seventh set (held out, scored once: 59/71,
# no impossible pick); each fact below is said in words of its own


def test_microscopy_allows_a_named_veil() -> None:
    """Condensation under a plate's seal veils a microscope's view: microscopy no longer forbids fog, which is chosen
    only where the text names a veil."""
    assert "fog" not in rules.requirements("Brightfield microscopy of cultured cells.", CATALOGUE).forbidden
    assert "fog" not in chosen("Brightfield microscopy of cultured cells.")
    assert "fog" in chosen("Brightfield images of a culture plate; condensation forms under the lid.")


# ---------------------------------------------------------------- after the eighth set (held out, scored once: 68/76,
# no impossible pick); each fact below is said in words of its own


def test_a_refilmed_curved_screen() -> None:
    assert {"gaussian_blur", "lens_distortion"} <= cue_names("Old quiz shows survive only as a film camera pointed at a monitor; the CRT bulges the frame.")
    # a specimen on a bench is no microscope: splashes on the camera's shield are possible there
    assert "lens_spatter" not in rules.requirements("Specimens photographed on a bench by an overhead camera.", CATALOGUE).forbidden


# ---------------------------------------------------------------- after the ninth set (held out, scored once: 48/67,
# 1 impossible pick); each fact below is said in words of its own


def test_an_overhead_book_scanner_is_no_flatbed() -> None:
    """A planetary scanner is a camera over a book in a cradle, lit from the side: the page's gutter can be in shade,
    which a flatbed's lid rules out; a flatbed still forbids shadows, and a neutron radiograph has no veil."""
    cradle = "Book scanner for the archive: overhead camera over a cradle; lines near the binding sit in shade."
    assert "shadow" not in rules.requirements(cradle, CATALOGUE).forbidden and "shadow" in chosen(cradle)
    assert "shadow" in rules.requirements("Letters fed through a flatbed scanner.", CATALOGUE).forbidden
    assert "fog" in rules.requirements("Neutron imaging of turbine blades.", CATALOGUE).forbidden


# ---------------------------------------------------------------- after the tenth set (held out, scored once: 48/72,
# 2 impossible picks); each fact below is said in words of its own


def test_indoors_the_weather_only_changes_the_light() -> None:
    """Under a roof no cloud lies over the scene and no rain falls through it; the clouds passing over a skylight
    change the light only. A window in view still lets the weather in."""
    hall = "Products photographed in our showroom, which has a glass roof, so the light dims when a cloud passes."
    assert {"cloud_overlay", "rain", "snow"} <= set(rules.requirements(hall, CATALOGUE).forbidden)
    assert "cloud_overlay" not in chosen(hall)
    assert "indoors" not in {k.name for k in rules.detect_kinds("Indoor camera looking out of a window at the street.")}


def test_a_photo_of_a_reader_screen_is_no_scan() -> None:
    text = "Genealogists photograph the microfilm reader screen at an angle with their phones."
    assert "perspective" not in rules.requirements(text, CATALOGUE).forbidden


@pytest.mark.parametrize(
    ("text", "corruption", "found"),
    [
        # from the sixth set's misses
        ("A flash short enough to freeze the spray of the fountain.", "frost", False),  # a strobe stops motion
        ("The housing ices up on January mornings.", "frost", True),
        ("Cameras in a walk-in freezer.", "frost", True),
        ("Saccades during the scan bend the vessels.", "elastic", True),  # the eye moves between scan lines
        ("The print wraps around the can, so the logo curves away.", "grid_distortion", True),
        ("A conveyor whose speed varies under the line sensor.", "grid_distortion", True),
        ("The weather balloon climbs through the cloud deck.", "fog", True),
        # from the seventh set's misses
        ("Chimneys photographed from below, shooting up from the yard.", "perspective", True),
        ("Old slides whose dyes have faded.", "color_shift", True),
        ("Held that close the phone cannot focus on the coin.", "defocus_blur", True),
        ("Patient motion during the scan bends the vertebrae.", "elastic", True),
        # from the ninth set's misses
        ("Coins lit by a raking lamp to show the relief.", "shadow", True),
        ("Seeds sit at different depths in the tray, so some come out soft.", "defocus_blur", True),
        ("Old negatives have shrunk, bending straight edges.", "elastic", True),
        ("The mast camera looks steeply down at the quay.", "perspective", True),
        # from the tenth set's misses
        ("Sunlight comes through the blinds in bands of light across the desk.", "shadow", True),
        ("A pinhole camera hidden in a smoke detector.", "vignetting", True),
        ("Letters where the ink has run in the rain.", "gaussian_blur", True),
        ("Maps that have cockled with damp.", "elastic", True),
        ("STM images distorted by thermal drift.", "grid_distortion", True),
        ("Students photograph tracks in a cloud chamber.", "cloud_overlay", False),
        # from the eleventh and twelfth sets' misses (session 7)
        ("The flat-panel detector has two dead columns.", "row_noise", True),
        ("Stock photos snapped in a hurry at the end of a shift.", "motion_blur", True),
        ("Runners' arms swinging past the finish camera.", "motion_blur", True),
        ("Signs photographed while driving past them.", "perspective", True),
        ("Thick books keep the lid from closing on the copier.", "defocus_blur", True),
        ("The web flutters, so focus comes and goes.", "defocus_blur", True),
        ("Coins lit from a low angle by one lamp.", "shadow", True),
        ("Sun flicker plays over the seabed in the shallows.", "shadow", True),
        ("Palms throw patches of shade over the market stalls.", "shadow", True),
        ("Photos of the forest canopy from below.", "shadow", False),  # a photo of a canopy is no shade under one
        ("Fish filmed through the curved wall of a round tank.", "lens_distortion", True),
        ("At its widest the zoom bows the shelves outwards.", "lens_distortion", True),
        ("The camera port fouls up with algae within a month.", "glass_blur", True),
        ("Tourists look through the scratched viewing panel.", "glass_blur", True),
        ("The robot arm keeps coming into view over the tray.", "occluder", True),
        ("Lorries come between the camera and the kerb.", "occluder", True),
        ("A nurse takes the picture through a speculum.", "occluder", True),
        ("Prints pressed against the glass squashes and stretches the ridges.", "elastic", True),
        ("Ripples on the pond bend the pebbles below.", "elastic", True),
        ("Old museum display glass has browned, so everything looks amber.", "color_shift", True),
        ("Selfies under warm vanity bulbs.", "color_shift", True),
        ("Photos through the thick shielding window are never quite sharp.", "gaussian_blur", True),
        ("The uploader shrinks each photo before sending it.", "pixelate", True),
        ("Far-off birds are a few pixels across.", "pixelate", True),
        ("Below 50 m there is little daylight left.", "low_light", True),
        ("The corners come out darker than the middle.", "vignetting", True),
        ("A circular fisheye pointed at the sky.", "vignetting", True),
        ("After we stretch the levels the skies show bands.", "posterize", True),
        ("Plans photographed on a copy stand where the pages bulge.", "grid_distortion", True),
        # from the thirteenth set's misses
        ("The carton is still moving when the strobe fires.", "motion_blur", True),
        ("Illumination falls off towards the rim of the dish.", "vignetting", True),
        ("Letters that have gone yellow in the attic.", "color_shift", True),
        ("A worn sensor bar leaves thin lines down every page.", "row_noise", True),
        ("Parking decks patrolled overnight by a rover.", "low_light", True),
        ("The lander descends fast onto the pad.", "zoom_blur", True),
        ("Wagons that speed up and slow down under the line camera.", "grid_distortion", True),
        # from the fourteenth set's misses
        ("The action camera bows the horizon.", "lens_distortion", True),
        ("Kitchens lit by cool white tubes or warm lamps.", "color_shift", True),
        ("Family slides that have gone orange.", "color_shift", True),
        ("A gamer's room lit by RGB strips.", "color_shift", True),
        ("The bait camera records 640x480 clips.", "pixelate", True),
        ("Betacam rushes with dropouts.", "impulse_noise", True),
        ("Next to modern footage the picture is soft.", "gaussian_blur", True),
        # from the fifteenth set's misses
        ("Vapour condenses on the sight glass over the shift.", "fog", True),
        ("Under the lamp the plates come out green.", "color_shift", True),
        ("Shot through a yellow filter to cut the glare.", "color_shift", True),
        ("Tendon scans with a linear probe.", "speckle_noise", True),
        ("The grid heats up and specimen drift blurs the lattice.", "motion_blur", True),
        ("Heat over the tarmac makes the runway lights ripple.", "elastic", True),
        ("Close-up frames go soft when the lens gets too close.", "defocus_blur", True),
        ("Rolling bands across the LED wall behind the presenter.", "row_noise", True),
        ("On hard stops the horizon rolls.", "rotation", True),
        ("Long eyelashes hide the pupil.", "occluder", True),
        ("Divers in a cloud of silt in front of the lens.", "cloud_overlay", False),
        ("Divers in a cloud of silt in front of the lens.", "fog", True),
        # from the sixteenth set's misses
        ("The image comes up a fibre bundle to the eyepiece.", "pixelate", True),
        ("A shadow band keeps the sun off the all-sky sensor.", "occluder", True),
        ("Someone sprayed graffiti on the camera window.", "occluder", True),
        ("When the dust blows the whole scene goes brown.", "color_shift", True),
        ("At lights-out a blue night light comes on.", "color_shift", True),
        ("With one small lamp everything beyond two metres goes black.", "low_light", True),
        ("Divers search the dock in nil visibility.", "low_light", True),
        ("Night frames are smeary whenever someone walks past.", "motion_blur", True),
        # from the seventeenth set's misses
        ("Each time the head rapids to the next hole the picture streaks.", "motion_blur", True),
        ("The dome camera ices over on cold nights.", "frost", True),
        ("Posters photographed from an angle to dodge the glare.", "perspective", True),
        ("The webcam sees the table as a trapezoid.", "perspective", True),
        ("When the signal fades whole lines are lost.", "row_noise", True),
        ("Filmed from the balcony over the audience.", "occluder", True),
        ("The round image goes dark towards the rim.", "vignetting", True),
        ("Torches light every particle in the cave pool.", "impulse_noise", True),
        # from the eighteenth set's misses
        ("Pebbles tumbling in the drum.", "motion_blur", True),
        ("Carts are wheeled past the scale camera.", "motion_blur", True),
        ("Retina photos through a condensing lens.", "horizontal_flip", True),
        ("Cosmic rays leave hits in long exposures.", "impulse_noise", True),
        ("A bad pixel column leaves a vertical stripe.", "row_noise", True),
        ("We bin 4x4 to get the counts up.", "pixelate", True),
        ("Near the edges straight lines bend.", "lens_distortion", True),
        ("The phone's focus lands on the shelf edge.", "defocus_blur", True),
        ("One LED: bright in the middle, the corners stay dark.", "vignetting", True),
        ("The summit station can sit in cloud for a week.", "fog", True),
        ("The summit station can sit in cloud for a week.", "cloud_overlay", False),
        # from the nineteenth set's misses
        ("Doorbell module with a 170° lens.", "lens_distortion", True),
        ("The camera views the plate 40° off vertical.", "perspective", True),
        ("A webcam fixed focused for documents at arm's length.", "defocus_blur", True),
        ("Uncoated samples charge up and jump along the scan lines.", "row_noise", True),
        ("A creased label, so the lines of text wave.", "elastic", True),
        ("Cuts reformatted from the axial series.", "pixelate", True),
        ("Players' sleeves cover the pieces.", "occluder", True),
        ("After an hour the window goes milky.", "fog", True),
        # from the twentieth set's misses
        ("Bottles at 600 bottles/min, still smeared at 1/4000 s.", "motion_blur", True),
        ("Shoplifters walk past the shelf camera.", "motion_blur", True),
        ("A 532 nm laser lights the droplets.", "speckle_noise", True),
        ("With the clip-on lens the corners go dark.", "vignetting", True),
        ("Half the time the phone focuses on the tablecloth.", "defocus_blur", True),
        ("The inspector's dive lamp is the only light at the intake.", "low_light", True),
        ("Parts dropped into the tray in any orientation.", "rotation", True),
        # from the twenty-first set's misses
        ("Boards pass under the camera at two metres a second.", "motion_blur", True),
        ("The robot's head camera bobs at every step.", "motion_blur", True),
        ("Night races shot at 1/50 under the floodlights.", "motion_blur", True),
        ("The scope gives a round image in the middle of the frame.", "vignetting", True),
        ("No daylight reaches the culvert.", "low_light", True),
        ("River water tea brown after rain.", "color_shift", True),
        ("When the link fades the picture breaks into blocks.", "pixelate", True),
    ],
)
def test_cues_after_the_held_out_sets(text: str, corruption: str, found: bool) -> None:
    """Cue keywords from the held-out sets' misses (sixth to twenty-first), each said in words of its own; ``found`` False:
    the words are no evidence of that corruption."""
    assert (corruption in cue_names(text)) is found


@pytest.mark.parametrize(
    ("text", "factor", "present"),
    [
        # a courier's handheld scanner photographs with its built-in camera: a handheld camera, not a flatbed
        ("Drivers photograph each parcel with the handheld scanner's built-in camera.", "scanner", False),
        ("Invoices go through the sheet-fed scanner.", "scanner", True),
        ("Census forms through a sheet-feeder at 300 dpi.", "scanner", True),
        # under a full overcast nothing casts a hard shadow, though the scene is outdoors
        ("Orchard rows photographed from the tractor.", "sunlit", True),
        ("Orchard rows photographed from the tractor, only ever under full overcast.", "sunlit", False),
        # dust lying on a plate is no veil in the air; dust in the air is
        ("Dust settles on the plate between cleanings.", "airborne_particles", False),
        ("Dust hangs in the air of the mill.", "airborne_particles", True),
        ("Faint bands on a blot imaged in the dark.", "photon_limited", True),
        ("A few hundred photons per pixel in each frame.", "photon_limited", True),
        ("Blood films at 100x oil on an upright scope.", "scope", True),
        ("Flexible nasendoscopy in clinic.", "scope", True),
        # a car on a workshop lift, a scale model, a forklift and a tank crawler are driven, but not on a road
        ("Mechanics photograph brake lines of cars up on the four-post lift.", "road_vehicle", False),
        ("A frame the size of a car hangs from the crane.", "road_vehicle", False),
        ("Forklift drivers watch the fork camera in the back aisles.", "road_vehicle", False),
        ("A crawler driving through the manway into the tank.", "road_vehicle", False),
        ("A net cleaner blasts fouling off the salmon pen.", "water", True),
        ("A camera on a tripod on the river bed.", "water", True),
        ("An ROV surveys the flooded quarry workings below the water line.", "flooded", True),
        ("Pregnancy checks with a 5 MHz transducer.", "acoustic_imaging", True),
        ("By noon ground heating ruins the seeing.", "air_turbulence", True),
        ("Delivery notes scanned in black and white at 300 dpi.", "bilevel", True),
        ("The housing window is spotted with dried spray.", "lens_contamination", True),
        ("Grit sticks to the window in clumps.", "lens_contamination", True),
        ("Inspectors e-mail the photos to the office.", "lossy_transmission", True),
        ("A 1 MP mono imager under red LEDs.", "greyscale", True),
        ("The stream has mono audio.", "greyscale", False),
        ("Skin examined under a Wood's lamp.", "tinted_light", True),
        ("Stage lit through a blue gel.", "tinted_light", True),
        ("The furnace load is glowing orange white.", "tinted_light", True),
        ("Photos at home in whatever light there is.", "tinted_light", True),
        ("Stalls under festoon bulbs.", "tinted_light", True),
        ("Read by the bedside lamp.", "tinted_light", True),
        ("Mince under the meat lamps.", "tinted_light", True),
    ],
)
def test_factors_of_session_seven(text: str, factor: str, present: bool) -> None:
    """Acquisition factors from the eleventh to twenty-first sets' misses, each in words of its own."""
    assert (factor in factors(text)) is present


@pytest.mark.parametrize(
    ("text", "corruption", "present"),
    [
        ("Drivers photograph each parcel with the handheld scanner's built-in camera, often at night.", "motion_blur", True),
        ("Drivers photograph each parcel with the handheld scanner's built-in camera, often at night.", "low_light", True),
        # a reflected-light microscope with a side lamp shades relief, and a cryostat's window ices over: named, they are chosen
        ("Coins under a stereo microscope, lit from a low angle by one lamp.", "shadow", True),
        ("A microscope looks through the cryostat window, where frost builds up.", "frost", True),
        ("Stained tissue sections under a microscope.", "frost", False),
        # megavolt X-rays from a linac see through the weather round an outdoor portal, and through a truck's cab
        ("Trucks and their drivers pass a 9 MeV linac portal in all weathers.", "rain", False),
        ("Mechanics photograph brake lines of cars up on the four-post lift.", "rain", False),
        # a thermal camera sees emitted heat: a dark cave or dusk is no low light for it
        ("Bats leave the cave at dusk, filmed with an uncooled LWIR core.", "low_light", False),
        ("Bats leave the cave at dusk, filmed with a phone.", "low_light", True),
        # scale models, a ferry's enclosed vehicle deck and a trailer's inside are no road; corridors are indoors
        ("A scale race car drives the department corridors.", "rain", False),
        ("Domes over the ferry's enclosed car deck.", "rain", False),
        ("A camera inside the trailer lets drivers check the load.", "rain", False),
        ("A 1 MP mono imager under red LEDs.", "color_shift", False),
    ],
)
def test_choices_of_session_seven(text: str, corruption: str, present: bool) -> None:
    """Plans after the eleventh to twenty-first sets' guards, each in words of its own."""
    assert (corruption in chosen(text)) is present


def test_kinds_and_outdoors_of_session_seven() -> None:
    assert {"gaussian_blur", "color_shift"} <= {h.name for h in acquisition.implied("Wedding videos on Hi8 cassettes.")}
    # a chest freezer is no patient's chest; marks on freight cars read out of doors are no document scan
    assert "medical" not in {k.name for k in rules.detect_kinds("A camera over the chest freezers in the shop.")}
    assert "documents" not in {k.name for k in rules.detect_kinds("Trackside OCR of the numbers on freight cars.")}
    assert "underwater" in {k.name for k in rules.detect_kinds("An ROV in the flooded mine workings.")}
    # a camera outside a machine's chamber looks in at an indoor process; outside a shop it is in the open air
    assert cues.outdoors("A camera outside the build chamber watches the powder bed.") is None
    assert cues.outdoors("A camera outside the shop watches the car park.") == "outside"


@pytest.mark.parametrize(
    ("text", "factor", "present"),
    [
        # a lift's car runs in a shaft inside the building, and its car is no road vehicle
        ("An inspection camera rides on top of the elevator car up the hoistway; the car climbs slowly.", "road_vehicle", False),
        ("Cameras in the lift shaft watch the counterweight.", "indoor_scene", True),
        # a camera out in every weather is under no roof, even over a car park
        ("A camera on a pole over the open car park, out in all weathers.", "indoor_scene", False),
        ("Concrete dust billows round the breaker.", "airborne_particles", True),
        ("Oil spitting from the wok lands near the camera.", "lens_contamination", True),
        ("Mud spots the lens filter after each lap.", "lens_contamination", True),
        ("Residents film their squats and lunges for the coach.", "moving_subject", True),
        ("Widefield images of the whole slide.", "sunlit", False),
        ("Screening with a RetCam in the neonatal unit.", "scope", True),
        # a smear in the frame is motion; a smear on the glass is dirt
        ("The contrast bolus is a smear in every frame.", "lens_contamination", False),
        ("Wet snouts keep smearing the window.", "lens_contamination", True),
        ("Calves slobber on the camera.", "lens_contamination", True),
        # a camera fixed in a tunnel is under a roof; a car driving through tunnels is still on the road
        ("Fixed cameras along the tunnel walls watch the traffic.", "indoor_scene", True),
        ("Fixed cameras along the tunnel walls watch the traffic.", "road_vehicle", False),
        ("A dash cam on the commute, in and out of road tunnels.", "road_vehicle", True),
        ("Tomato houses under HPS lamps.", "tinted_light", True),
        ("The stage LEDs cycle through colours all night.", "tinted_light", True),
        ("Pictures go over the analogue 5.8 GHz video.", "analogue_link", True),
        ("The picture tears into horizontal lines and static.", "analogue_link", True),
        ("Static and mobile cameras on the site.", "analogue_link", False),
        # a satellite that carries the pictures takes none
        ("Trail cameras send their photos over satellite.", "orbit", False),
        ("Sentinel-2 scenes of the delta.", "orbit", True),
        ("Reeds brush across the lens in the wind.", "occlusion", True),
        ("Sparks shoot through the frame.", "moving_subject", True),
        ("The weak emission of the flame front.", "dim_light", True),
        # a road is read from the road, never from a bare car, vehicle or driver
        ("The camera rides the fairground ride's lead car.", "road_vehicle", False),
        ("Each vehicle in the test chamber is sprayed with salt.", "road_vehicle", False),
        ("The driver of the gantry crane watches the camera.", "road_vehicle", False),
        ("Dash cams in city traffic.", "road_vehicle", True),
        ("Cameras over the motorway gantries.", "road_vehicle", True),
        ("Couriers photograph house numbers while rolling past.", "moving_platform", True),
        # a camera worn on the chest is no patient's chest
        ("Climbers wear a chest POV camera on the ridge.", "medical", False),
        ("A laser shearography rig checks the rudder skins.", "coherent_imaging", True),
        ("Dust hanging in the air of the attic.", "airborne_particles", True),
        ("Steam rising from the pans all evening.", "airborne_particles", True),
        ("Grease and flour film the camera by Friday.", "condensation", True),
        ("The dog moves fast round the ring.", "moving_subject", True),
        ("Geckos under UVB tubes.", "tinted_light", True),
        ("Seedlings under purple LEDs.", "tinted_light", True),
        ("Light-sheet stacks of cleared tissue.", "scope", True),
        ("Sample boxes come out of liquid nitrogen.", "frozen_subject", True),
        # a sheetfed printing press prints sheets; nothing scans them
        ("A camera over the sheetfed press checks each printed sheet.", "scanner", False),
        ("A camera over the sheetfed press checks each printed sheet.", "sheet_feeder", False),
        ("Gulls leave droppings on the housing.", "lens_contamination", True),
        ("By noon the windscreen is covered in squashed insects.", "lens_contamination", True),
        ("The seeing is poor low over the hills; the seeing makes the limb boil.", "air_turbulence", True),
        ("Unscratched coating hides some of the numbers.", "occlusion", True),
        ("The pathologist drives the scope remotely; motion JPEG over the WAN.", "lossy_transmission", True),
        # the crew's dark-adapted eyes are no greyscale camera; an intensifier's phosphor is green
        ("Dim red lamps on the bridge keep the watch's night vision.", "greyscale", False),
        ("Clips recorded through night vision goggles.", "greyscale", False),
        ("Clips recorded through night vision goggles.", "tinted_light", True),
        ("The visor's green tint.", "tinted_light", True),
        ("Owl survey under starlight.", "dim_light", True),
        ("The intensifier sparkles with scintillation.", "photon_limited", True),
        ("A steel bar across the window hides the chin.", "occlusion", True),
        ("A holographic imager on the CTD rosette.", "water", True),
        ("Barnacles start growing over the camera port.", "lens_contamination", True),
        ("The C-arm's round field.", "sunlit", False),
        # a scanner under water is a laser or sonar instrument, not a flatbed
        ("A laser line scanner on the ROV maps the wreck.", "scanner", False),
        ("A camera on the longline in the sea loch.", "water", True),
        ("Pins fly and the camera can't keep up.", "moving_subject", True),
        ("The old varnish has yellowed.", "tinted_light", True),
        ("The picture jumps with the pole in a gale.", "moving_platform", True),
    ],
)
def test_factors_of_session_eight(text: str, factor: str, present: bool) -> None:
    """Acquisition factors from the twenty-second set's misses, each in words of its own."""
    assert (factor in factors(text)) is present


@pytest.mark.parametrize(
    ("text", "corruption", "present"),
    [
        ("A camera on a pole over the open car park, out in all weathers.", "rain", True),
        ("An inspection camera rides on top of the elevator car up the hoistway; the car climbs slowly.", "rain", False),
        ("Plumbers in the crawl space wear head torches.", "low_light", True),
        ("The probe's LED only reaches a hand's width ahead.", "low_light", True),
        ("A camera pushed up the chimney on rods.", "low_light", True),
        ("Visitors photograph the paintings; flash is not allowed.", "low_light", True),
        ("Wide-field fundus pictures with the periphery always dark.", "vignetting", True),
        ("Wide-field fundus pictures with the periphery always dark.", "low_light", False),
        # a wide field is the optics' field, not a sunlit one
        ("Wide-field fundus pictures with the periphery always dark.", "shadow", False),
        ("Half the frames have the focus off.", "defocus_blur", True),
        ("Tickets arrive creased from wallets.", "elastic", True),
        ("A handheld thermal scope on night patrol.", "pixelate", True),
        ("Train crew photograph the crumpled delivery note.", "elastic", True),
        ("The bars of a barcode on a thin vial bend away at the sides.", "grid_distortion", True),
        ("Fish are counted through a clear pipe.", "lens_distortion", True),
        ("The camera modem sends tiny photos.", "pixelate", True),
        ("Vans are parked at all sorts of angles.", "perspective", True),
        ("The intensifier's phosphor screen softens everything.", "gaussian_blur", True),
        ("In a strong wind the picture smears.", "motion_blur", True),
        ("Each vehicle in the test chamber is sprayed with salt.", "rain", False),
        # a fluid that goes cloudy is turbid, not the sky
        ("In the bladder the irrigation goes cloudy with blood.", "cloud_overlay", False),
        ("In the bladder the irrigation goes cloudy with blood.", "fog", True),
        ("Climbers wear a chest POV camera on the ridge; spindrift blows past.", "snow", True),
        ("A phone photographs the handwritten labels of tubes just out of the -80 freezer; they ice over.", "frost", True),
        # a photographed page can be steamed over (a scanner's cannot)
        ("Handwritten orders on the rail by the steaming pans.", "fog", True),
        ("At this magnification the focus is paper thin.", "defocus_blur", True),
        ("Bins deep in the racking come out almost black.", "low_light", True),
        ("Half the time they've forgotten to switch the hall light on.", "low_light", True),
        ("Diving through the halocline.", "glass_blur", True),
        ("It rains on most days.", "rain", True),
        ("Skaters throw ice chips at the rink-side cameras.", "snow", True),
        ("Pellets fall past the camera; each one is a streak.", "motion_blur", True),
        ("Lit by a plain LED bar, not a strobe, the parcels come out smeared.", "motion_blur", True),
        ("Seedlings photographed through round glass jars.", "lens_distortion", True),
        ("A phone held to the eyepiece of the telescope.", "vignetting", True),
        ("The gut heaves with breathing while the raster is drawn.", "elastic", True),
        ("Paintings shot from off to one side to avoid reflections.", "perspective", True),
        ("The clipboard is rarely square to the camera.", "perspective", True),
        ("A circle in a black frame with darker edges.", "vignetting", True),
        ("A 2.8 mm lens on the corridor camera.", "lens_distortion", True),
        ("Stitched 360 video from the reef.", "lens_distortion", True),
        ("Beyond the lamps' reach the picture fades to black.", "low_light", True),
        # a plume of sediment is in the water, not on the lens
        ("The dredge head throws up a sediment plume under water.", "lens_spatter", False),
        ("Every bead gets a purple-green fringe.", "chromatic_aberration", True),
        ("Labels photographed through the round glass of the jars.", "lens_distortion", True),
        ("Held nearer the gums than the phone can focus.", "defocus_blur", True),
        ("A green slime grows on the housing.", "glass_blur", True),
    ],
)
def test_choices_of_session_eight(text: str, corruption: str, present: bool) -> None:
    """Plans after the twenty-second set's guards, each in words of its own."""
    assert (corruption in chosen(text)) is present


def test_no_semantic_lens_drops_under_water() -> None:
    """Under water no drop lands on a lens: the semantic reading of lens contamination is off there
    (``semantic_unless_factors``), while fouling named in words still counts."""
    from domainbench.planner import semantic

    text = "Snorkellers in the kelp; waves wash over the camera."
    assert "water" in factors(text)
    assert "lens_contamination" not in {m.factor for m in semantic.read(text)}
    assert "lens_contamination" in {m.factor for m in semantic.read("Waves wash over the camera on the breakwater.")}
    assert "lens_contamination" in factors("A diver's camera in the kelp; barnacles start growing over the camera port.")


def test_a_misspelt_semantic_veto_is_a_clear_error(tmp_path) -> None:
    """A factor whose semantic_unless_factors names no factor of the file stops with one clear error."""
    from domainbench.errors import UserInputError

    bad = tmp_path / "acquisition.toml"
    bad.write_text('[factors.wet_lens]\ncategory = "optics"\nlabel = "drops on the lens"\nkeywords = ["drops"]\n'
                   'semantic_unless_factors = ["watr"]\n')
    with pytest.raises(UserInputError, match=r"semantic_unless_factors name unknown factors \['watr'\]"):
        acquisition.factor_book(bad)


@pytest.mark.parametrize(
    ("text", "factor", "present"),
    [
        # a ski lift stands out on the mountain; a car on a workshop lift is under a roof
        ("Cameras on the lift towers watch skiers load the chairlift.", "indoor_scene", False),
        ("A camera on the gondola pylon.", "indoor_scene", False),
        ("The van sits up on the lift while we film the exhaust.", "indoor_scene", True),
        ("Imaged through the quartz viewport of the vacuum chamber.", "glass", True),
        ("The mixer is watched through its sight glass.", "glass", True),
        ("Splashes filmed at 2,000 fps.", "photon_limited", True),
        ("Replays shown at 1,000 fps on the display.", "photon_limited", False),
        # the twenty-ninth set's
        ("The plans are too large for the scanner, so we photograph them on the floor.", "scanner", False),
        ("Maps that won't fit the flatbed are shot with a phone.", "scanner", False),
        ("Old deeds go through the flatbed scanner.", "scanner", True),
        ("A phone snap of the 20-week scan picture on the fridge.", "coherent_imaging", True),
        ("Live neurons imaged with as little light as possible.", "photon_limited", True),
        ("Phototoxicity limits how much light the cells can take.", "photon_limited", True),
        ("Mud from the wheels ends up on the camera lenses; grit flies onto the lenses.", "lens_contamination", True),
        # the thirtieth set's
        ("Brine drips onto the camera box all shift; drops land on the enclosure glass.", "lens_contamination", True),
        ("The kiln's image is waving all day, the air above is hot.", "air_turbulence", True),
        ("Over the furnace the picture wobbles like a hot road in summer.", "road_vehicle", False),
        ("Dash cams on the ring road.", "road_vehicle", True),
        ("We lower a drop camera to the lake bottom.", "water", True),
        ("The quadcopter's prop wash lifts the grain dust.", "airborne_particles", True),
        ("The foals are rarely still.", "moving_subject", True),
        ("Footage comes off the recorder as H.264.", "lossy_transmission", True),
        # the thirty-first set's
        ("Wax smears the tip of the scope.", "lens_contamination", True),
        ("Old ledgers scanned on a flatbed set to black & white at 300 dpi.", "bilevel", True),
        ("Black & white portraits from the studio's film days.", "bilevel", False),
        ("Under the bar's lamps everything has a warm tint.", "tinted_light", True),
        ("Lichens photographed through a hand lens held to the phone.", "close_range", True),
        # the thirty-second set's
        ("The perspex bubble of the old helicopter is crazed.", "glass", True),
        ("The patient blinks during most exposures.", "moving_subject", True),
        ("Clips reach the office over the internet from each branch.", "lossy_transmission", True),
        # the thirty-third set's
        ("The club bar is lit by coloured stage LEDs.", "tinted_light", True),
        ("The calf lunges at the gate.", "moving_subject", True),
        ("The cattle scanner saves each ultrasound clip.", "scanner", False),
        # the thirty-fourth set's
        ("Flood extent from Sentinel-1 over the delta.", "orbit", True),
        ("VV backscatter of the paddies in dB.", "turbid_water", False),
        ("Murky water and heavy backscatter from the lamps.", "turbid_water", True),
        ("A camera pushed into the live main under pressure.", "water", True),
        ("The probe head jiggles in the current.", "moving_platform", True),
        ("An under-vehicle line-scan camera at the barrier.", "swath_scan", True),
        ("The ticket machine's touch screen is scuffed.", "glass", True),
        ("Grit thrown up by the tracks hangs in the light.", "airborne_particles", True),
        # the thirty-fifth set's
        ("The freezer cases glow cold blue.", "tinted_light", True),
        ("Red par cans are the only stage light.", "tinted_light", True),
        ("The propeller is filmed through a hull window.", "moving_subject", True),
        ("Slides captured from a screen share.", "low_resolution", True),
    ],
)
def test_factors_of_session_nine(text: str, factor: str, present: bool) -> None:
    """Acquisition factors from the twenty-seventh and twenty-ninth to thirty-fifth sets' misses, each in words of its own."""
    assert (factor in factors(text)) is present


@pytest.mark.parametrize(
    ("text", "corruption", "present"),
    [
        ("A camera on the ski lift's top station; it snows most of the winter.", "snow", True),
        ("A grey film builds up on the viewport over a campaign.", "glass_blur", True),
        ("Drops on a hot plate, filmed at 10,000 fps.", "shot_noise", True),
        ("A drop fills 30 of the 320 x 240 pixels once the camera crops for speed.", "pixelate", True),
        ("The lobby DVR still records in D1.", "pixelate", True),
        ("Children run past the doorbell camera and block it.", "occluder", True),
        ("Bound registers photographed by phone because they are too big for the scanner; the gutter is in shadow.", "shadow", True),
        ("Silt comes up like a cloud when the sled lands on the lake floor.", "cloud_overlay", False),
        ("Couriers hold the parcel label up to the kiosk camera at whatever angle suits them.", "perspective", True),
        ("A mango tree's shade on half of the market stall.", "shadow", True),
        ("The phone is held so close that the receipt is often not sharp.", "defocus_blur", True),
        ("Thyroid scintigraphy with a pinhole collimator.", "gaussian_blur", True),
        ("Faint horizontal streaks on some of the digitised films.", "row_noise", True),
        ("A coherent probe beam makes fringe patterns from the dust on the windows.", "speckle_noise", True),
        ("Photocopies of typed minutes, the letters fuzzy.", "gaussian_blur", True),
        ("The flat panel has a handful of dead pixels.", "impulse_noise", True),
        ("Our line camera has one bad line near the edge.", "row_noise", True),
        ("The spray hall's air is saturated with water.", "fog", True),
        ("Mineral grains filmed while we rotate the stage in steps.", "rotation", True),
        ("The two scanner heads disagree: the colour differs between the halves.", "color_shift", True),
        ("Barnacles build up over the lower third of the port.", "occluder", True),
        ("Forwarded plans where the dimensions are unreadable even zoomed in.", "pixelate", True),
        ("Every print comes out the wrong colour under those lamps.", "color_shift", True),
        # radio echoes see through the clouds that keep optical pictures from the ground
        ("Radar backscatter maps because the rainy season keeps the optical scenes cloudy.", "cloud_overlay", False),
        ("Dancers throw powder; a colour cloud hangs in the air.", "fog", True),
        ("Dancers throw powder; a colour cloud hangs in the air.", "cloud_overlay", False),
        ("Ground radar profiles show horizontal bands from antenna ringing.", "row_noise", True),
        ("Tags are radially smeared as the robot drives at them.", "zoom_blur", True),
        ("The camera watches the corner through a convex mirror.", "lens_distortion", True),
        ("Every edge gets red/blue fringes through the scan lens.", "chromatic_aberration", True),
        ("The room has only one window, so one page is darker.", "shadow", True),
        ("Weed sways in the current and covers the animals.", "occluder", True),
        ("Rime coats the mast camera's window on cold nights.", "frost", True),
        ("Fans in the pit get in front of the camera all night.", "occluder", True),
        ("Coins end up tiny in the frame.", "pixelate", True),
    ],
)
def test_choices_of_session_nine(text: str, corruption: str, present: bool) -> None:
    """Plans after the twenty-seventh and twenty-ninth to thirty-fifth sets' guards, each in words of its own."""
    assert (corruption in chosen(text)) is present


def test_a_semantic_reading_needs_closeness_to_its_exemplar(monkeypatch) -> None:
    """Beyond its margin over a generic description, a clause read by meaning must be close to the exemplar itself
    (``semantic.MIN_SIMILARITY``): a reading just under the floor is dropped, one above it kept."""
    from domainbench.planner import semantic

    text = "Grit from the saw drifts between the lens and the log."
    (match,) = semantic.read(text)
    assert match.factor == "lens_contamination" and match.similarity >= semantic.MIN_SIMILARITY
    monkeypatch.setattr(semantic, "MIN_SIMILARITY", match.similarity + 1e-6)
    assert semantic.read(text) == []


@pytest.mark.parametrize(
    ("text", "factor", "present"),
    [
        # the thirty-sixth set's
        ("Weld seams are checked with a phased array ultrasonic probe.", "coherent_imaging", True),
        ("The flaw detector exports C-scan maps of each panel.", "acoustic_imaging", True),
        ("Parts come out of the ultrasonic cleaner and are photographed on a light box.", "acoustic_imaging", False),
        ("Sample jars are photographed through the glove box window.", "glass", True),
        # the thirty-seventh set's
        ("A structured-light sensor: the laser dot projector sits beside the lens.", "coherent_imaging", True),
        ("The gate camera watches the supermarket car park.", "indoor_scene", False),
        ("The gate camera watches the underground car park.", "indoor_scene", True),
        ("The refinery flare stack is lit by low-pressure sodium, so the video is orange monochrome.", "greyscale", False),
        ("The mono camera on the press line.", "greyscale", True),
        # the thirty-eighth set's
        ("Old Ceefax pages come back from a capture card that plays the tapes.", "page_photographed", False),
        ("Students photograph the exam papers on the desk with their phones.", "page_photographed", True),
        # the thirty-ninth set's
        ("A borescope team inspects the aircraft's fuel tanks in the hangar.", "airborne", False),
        ("Survey photos from a light aircraft at 1,500 ft.", "airborne", True),
        ("Duodenoscope and cholangioscope videos from ERCP lists.", "tissue", True),
        # the forty-first set's
        ("A camera on a line under the ice of the reservoir.", "water", True),
        ("The defrost cycle leaves condensation on the freezer camera's window.", "condensation", True),
        ("Dew on the leaves of the seedlings at dawn.", "condensation", False),
        # the forty-second set's
        ("A wrist camera beside the random orbital sander.", "orbit", False),
        ("Crop maps from a satellite in sun-synchronous orbit.", "orbit", True),
    ],
)
def test_factors_of_session_ten(text: str, factor: str, present: bool) -> None:
    """Acquisition factors from the thirty-sixth to forty-second sets' misses, each in words of its own."""
    assert (factor in factors(text)) is present


@pytest.mark.parametrize(
    ("text", "corruption", "present"),
    [
        # the thirty-sixth set's
        ("A camera on the kerb sees the parked cars at a shallow angle.", "perspective", True),
        ("Forklifts block the view of the racking for minutes at a time.", "occluder", True),
        ("Camera operators in thick gloves often miss focus.", "defocus_blur", True),
        ("Prints are sorted in the darkroom under dim red safelights.", "color_shift", True),
        ("The tomatoes are very red when they are ripe.", "color_shift", False),
        ("In heavy rain fade the feed is full of sparklies.", "impulse_noise", True),
        ("Long dark frames on the station collect proton hits.", "salt_and_pepper", True),
        ("Cavers photograph the formations by the pool of light from a helmet lamp.", "vignetting", True),
        # the thirty-seventh set's
        ("Heat shimmer over the runway makes the aircraft wobble in the long lens.", "glass_blur", True),
        ("Vandals have spray painted half of the lens window.", "occluder", True),
        ("I film my son's football match on my phone zoomed right in from the stands.", "pixelate", True),
        ("Market stalls in an open car park; it drizzles most afternoons.", "rain", True),
        # the thirty-eighth set's
        ("Parcels are still sliding down the chute when the reader fires.", "motion_blur", True),
        ("Behind the ferry's stern the wake is aerated water.", "fog", True),
        ("Moths fly in front of the dome and glow across the night picture.", "fog", True),
        ("The shop's DVR keeps two weeks of footage.", "jpeg_compression", True),
        # the thirty-ninth set's
        ("Blood and debris cloud the view of the arthroscope now and then.", "fog", True),
        ("Blood and debris cloud the view of the arthroscope now and then.", "cloud_overlay", False),
        ("Fish come out streaked in the trawl camera's frames.", "motion_blur", True),
        ("The light falls off strongly from the centre of the plate.", "vignetting", True),
        ("Readings are photographed off the old CRT monitor.", "row_noise", True),
        ("Shop photos under household bulbs.", "color_shift", True),
        ("Customers keep their hands over the counter camera's view.", "occluder", True),
        ("Field officers send the photos over 2G networks.", "pixelate", True),
        # the fortieth set's
        ("The ring light leaves the middle bright and the edges fall off to dark.", "vignetting", True),
        ("Hum bars roll through the analogue feed whenever the pump starts.", "row_noise", True),
        ("Old ledgers whose pages never lie flat.", "grid_distortion", True),
        ("The aquarium's lights are blue at feeding time.", "color_shift", True),
        ("Harbour cameras get a salt crust on their domes.", "fog", True),
        # the forty-first set's
        ("The grading belt on the potato harvester runs behind the tractor; it rains most of October.", "rain", True),
        ("Sealed conveyor line in the bottling hall.", "rain", False),
        ("The pond is green with algae by July.", "color_shift", True),
        ("A bar's purple mood lighting.", "color_shift", True),
        ("The drop camera spins on the cable near the bottom.", "motion_blur", True),
        ("Motorway cameras look through the spray thrown up by the traffic.", "fog", True),
        ("Short lenses over the pitch bend its edges into curves.", "lens_distortion", True),
        ("Indoor handball at a 1/60 shutter.", "motion_blur", True),
        ("In the quarry lake you cannot see further than 2 m.", "fog", True),
        # the forty-second set's
        ("The orbital polisher's wrist camera shakes with the pad.", "cloud_overlay", False),
        ("The orbital polisher's wrist camera shakes with the pad.", "motion_blur", True),
        ("Takeaway photos under warm downlights.", "color_shift", True),
        ("Our night stream from the pier is dark and orange.", "color_shift", True),
        ("Insects fly in front of the dome all summer.", "occluder", True),
    ],
)
def test_choices_of_session_ten(text: str, corruption: str, present: bool) -> None:
    """Plans after the thirty-sixth to forty-second sets' guards, each in words of its own."""
    assert (corruption in chosen(text)) is present
