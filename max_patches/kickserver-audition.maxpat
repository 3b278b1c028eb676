{
	"patcher": {
		"fileversion": 1,
		"appversion": {
			"major": 8,
			"minor": 6,
			"revision": 5,
			"architecture": "x64",
			"modernui": 1
		},
		"classnamespace": "box",
		"rect": [ 100.0, 100.0, 1000.0, 560.0 ],
		"openrect": [ 0.0, 0.0, 280.0, 169.0 ],
		"bglocked": 0,
		"openinpresentation": 1,
		"default_fontsize": 10.0,
		"default_fontface": 0,
		"default_fontname": "Arial Bold",
		"gridonopen": 1,
		"gridsize": [ 8.0, 8.0 ],
		"gridsnaponopen": 1,
		"objectsnaponopen": 1,
		"statusbarvisible": 2,
		"toolbarvisible": 1,
		"boxanimatetime": 200,
		"enablehscroll": 1,
		"enablevscroll": 1,
		"devicewidth": 280.0,
		"description": "Play the last kick the kickserver device made, mixed into this track's audio (an audio effect: put it on any audio track).",
		"digest": "kickserver audition",
		"tags": "kick drum audition buffer",
		"style": "",
		"subpatcher_template": "",
		"boxes": [
			{
				"box": {
					"id": "obj-1",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 10.0, 120.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 2.0, 120.0, 18.0 ],
					"text": "kickserver audition",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-2",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 20.0, 60.0, 60.0, 30.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 24.0, 60.0, 30.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Play the last kick kickserver made (the kickserver device's last kick line) on this track.",
							"parameter_longname": "KSA Play",
							"parameter_mmax": 1,
							"parameter_shortname": "Play",
							"parameter_type": 2
						}
					},
					"text": "Play",
					"texton": "Play",
					"varname": "KSA Play"
				}
			},
			{
				"box": {
					"id": "obj-3",
					"maxclass": "live.dial",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 200.0, 60.0, 44.0, 48.0 ],
					"presentation": 1,
					"presentation_rect": [ 80.0, 20.0, 44.0, 48.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Level of the kick, mixed into the track's audio.",
							"parameter_initial": [ -6.0 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KSA Level",
							"parameter_mmax": 0.0,
							"parameter_mmin": -70.0,
							"parameter_shortname": "Level",
							"parameter_type": 0,
							"parameter_unitstyle": 4
						}
					},
					"varname": "KSA Level"
				}
			},
			{
				"box": {
					"id": "obj-4",
					"maxclass": "live.toggle",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"parameter_enable": 1,
					"patching_rect": [ 300.0, 60.0, 15.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 136.0, 30.0, 15.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "On: play each new kick as soon as it has been read.",
							"parameter_initial": [ 0 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KSA Auto",
							"parameter_mmax": 1,
							"parameter_shortname": "Auto",
							"parameter_type": 2
						}
					},
					"varname": "KSA Auto"
				}
			},
			{
				"box": {
					"id": "obj-5",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 320.0, 58.0, 110.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 154.0, 28.0, 110.0, 18.0 ],
					"text": "Auto: play each kick",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-6",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 400.0, 300.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 80.0, 264.0, 20.0 ],
					"text": "no kick yet: press Generate in kickserver"
				}
			},
			{
				"box": {
					"id": "obj-7",
					"linecount": 2,
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 430.0, 300.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 100.0, 264.0, 40.0 ],
					"text": ""
				}
			},
			{
				"box": {
					"id": "obj-10",
					"maxclass": "newobj",
					"numinlets": 0,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 140.0, 140.0, 22.0 ],
					"text": "r kickserver-last-kick"
				}
			},
			{
				"box": {
					"id": "obj-11",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "", "", "bang" ],
					"patching_rect": [ 20.0, 170.0, 60.0, 22.0 ],
					"text": "t a a b"
				}
			},
			{
				"box": {
					"id": "obj-12",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 210.0, 100.0, 22.0 ],
					"text": "prepend replace"
				}
			},
			{
				"box": {
					"id": "obj-13",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 130.0, 210.0, 80.0, 22.0 ],
					"text": "prepend set"
				}
			},
			{
				"box": {
					"id": "obj-14",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 220.0, 210.0, 140.0, 22.0 ],
					"text": "set reading the kick..."
				}
			},
			{
				"box": {
					"id": "obj-15",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "float", "bang" ],
					"patching_rect": [ 20.0, 250.0, 140.0, 22.0 ],
					"text": "buffer~ ---kickaudition"
				}
			},
			{
				"box": {
					"id": "obj-16",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 120.0, 280.0, 40.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-17",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 170.0, 310.0, 130.0, 22.0 ],
					"text": "set ready: press Play"
				}
			},
			{
				"box": {
					"id": "obj-18",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 120.0, 310.0, 44.0, 22.0 ],
					"text": "gate 1 0"
				}
			},
			{
				"box": {
					"id": "obj-19",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 380.0, 110.0, 30.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-20",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 120.0, 350.0, 40.0, 22.0 ],
					"text": "start"
				}
			},
			{
				"box": {
					"id": "obj-21",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "signal", "bang" ],
					"patching_rect": [ 120.0, 380.0, 140.0, 22.0 ],
					"text": "play~ ---kickaudition 1"
				}
			},
			{
				"box": {
					"id": "obj-22",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 200.0, 120.0, 44.0, 22.0 ],
					"text": "dbtoa"
				}
			},
			{
				"box": {
					"id": "obj-23",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 200.0, 150.0, 64.0, 22.0 ],
					"text": "pack 0. 20"
				}
			},
			{
				"box": {
					"id": "obj-24",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "signal", "bang" ],
					"patching_rect": [ 200.0, 180.0, 40.0, 22.0 ],
					"text": "line~"
				}
			},
			{
				"box": {
					"id": "obj-25",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "signal" ],
					"patching_rect": [ 120.0, 420.0, 40.0, 22.0 ],
					"text": "*~"
				}
			},
			{
				"box": {
					"id": "obj-26",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "signal", "signal" ],
					"patching_rect": [ 440.0, 300.0, 54.0, 22.0 ],
					"text": "plugin~"
				}
			},
			{
				"box": {
					"id": "obj-27",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "signal", "signal" ],
					"patching_rect": [ 440.0, 460.0, 60.0, 22.0 ],
					"text": "plugout~"
				}
			},
			{
				"box": {
					"id": "obj-30",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 170.0, 140.0, 560.0, 20.0 ],
					"text": "the path of each kick kickserver.amxd gets (its [s kickserver-last-kick]); read into the buffer with replace (resized to the file)"
				}
			},
			{
				"box": {
					"id": "obj-31",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 220.0, 280.0, 520.0, 20.0 ],
					"text": "the buffer~ bangs its right outlet once the file is read: ready; with Auto on, played at once"
				}
			},
			{
				"box": {
					"id": "obj-32",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 510.0, 380.0, 460.0, 20.0 ],
					"text": "the track's own audio passes through; the kick (mono) is mixed into both channels at Level"
				}
			}
		],
		"lines": [
			{
				"patchline": {
					"destination": [ "obj-11", 0 ],
					"source": [ "obj-10", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-14", 0 ],
					"source": [ "obj-11", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-7", 0 ],
					"source": [ "obj-14", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-13", 0 ],
					"source": [ "obj-11", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-6", 0 ],
					"source": [ "obj-13", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-12", 0 ],
					"source": [ "obj-11", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-15", 0 ],
					"source": [ "obj-12", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-16", 0 ],
					"source": [ "obj-15", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-17", 0 ],
					"source": [ "obj-16", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-7", 0 ],
					"source": [ "obj-17", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-18", 1 ],
					"source": [ "obj-16", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-18", 0 ],
					"source": [ "obj-4", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-20", 0 ],
					"source": [ "obj-18", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-19", 0 ],
					"source": [ "obj-2", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-20", 0 ],
					"source": [ "obj-19", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-21", 0 ],
					"source": [ "obj-20", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-22", 0 ],
					"source": [ "obj-3", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-23", 0 ],
					"source": [ "obj-22", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-23", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 1 ],
					"source": [ "obj-24", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 0 ],
					"source": [ "obj-21", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-27", 0 ],
					"source": [ "obj-25", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-27", 1 ],
					"source": [ "obj-25", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-27", 0 ],
					"source": [ "obj-26", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-27", 1 ],
					"source": [ "obj-26", 1 ]
				}
			}
		],
		"parameters": {
			"obj-2": [ "KSA Play", "Play", 0 ],
			"obj-3": [ "KSA Level", "Level", 0 ],
			"obj-4": [ "KSA Auto", "Auto", 0 ]
		},
		"dependency_cache": [],
		"project": {
			"version": 1,
			"creationdate": 3590052786,
			"modificationdate": 3590052786,
			"viewrect": [ 0.0, 0.0, 300.0, 500.0 ],
			"autoorganize": 1,
			"hideprojectwindow": 1,
			"showdependencies": 1,
			"autolocalize": 0,
			"contents": {
				"patchers": {}
			},
			"layout": {},
			"searchpath": {},
			"detailsvisible": 0,
			"amxdtype": 1633771873,
			"readonly": 0,
			"devpathtype": 0,
			"devpath": ".",
			"sortmode": 0,
			"viewmode": 0,
			"includepackages": 0
		},
		"autosave": 0
	}
}
