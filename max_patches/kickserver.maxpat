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
		"rect": [ 100.0, 100.0, 1600.0, 720.0 ],
		"openrect": [ 0.0, 0.0, 860.0, 169.0 ],
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
		"devicewidth": 860.0,
		"description": "Generate kick drums with the kickserver daemon over OSC.",
		"digest": "kickserver OSC client",
		"tags": "kick drum generator osc",
		"style": "",
		"subpatcher_template": "",
		"boxes": [
			{
				"box": {
					"id": "obj-1",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 10.0, 80.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 2.0, 80.0, 18.0 ],
					"text": "kickserver",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-2",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 100.0, 10.0, 190.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 92.0, 2.0, 190.0, 18.0 ],
					"text": "kick drums from the OSC daemon",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-3",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 20.0, 60.0, 72.0, 30.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 22.0, 72.0, 30.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Ask the daemon for new kicks with the settings on the right.",
							"parameter_longname": "KS Generate",
							"parameter_mmax": 1,
							"parameter_shortname": "Generate",
							"parameter_type": 2
						}
					},
					"text": "Generate",
					"texton": "Generate",
					"varname": "KS Generate"
				}
			},
			{
				"box": {
					"id": "obj-4",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 180.0, 60.0, 72.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 56.0, 72.0, 18.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Ask for variations of the last kick, as far from it as Strength says.",
							"parameter_longname": "KS Vary",
							"parameter_mmax": 1,
							"parameter_shortname": "Vary",
							"parameter_type": 2
						}
					},
					"text": "Vary",
					"texton": "Vary",
					"varname": "KS Vary"
				}
			},
			{
				"box": {
					"id": "obj-5",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 560.0, 60.0, 72.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 78.0, 72.0, 16.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Ping the daemon and show its model, device and queue.",
							"parameter_longname": "KS Check",
							"parameter_mmax": 1,
							"parameter_shortname": "Check",
							"parameter_type": 2
						}
					},
					"text": "Check",
					"texton": "Check",
					"varname": "KS Check"
				}
			},
			{
				"box": {
					"id": "obj-6",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 270.0, 40.0, 44.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 88.0, 20.0, 44.0, 18.0 ],
					"text": "Count",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-7",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 270.0, 90.0, 44.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 88.0, 38.0, 44.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "How many kicks one press makes (1 to 16).",
							"parameter_initial": [ 1 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Count",
							"parameter_mmax": 16,
							"parameter_mmin": 1,
							"parameter_shortname": "Count",
							"parameter_type": 1,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Count"
				}
			},
			{
				"box": {
					"id": "obj-8",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 330.0, 40.0, 44.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 88.0, 58.0, 44.0, 18.0 ],
					"text": "Steps",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-9",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 390.0, 90.0, 44.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 88.0, 76.0, 44.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Sampling steps, 1 to 200: more is slower and usually cleaner. 0 (the default) sends none, so the daemon uses the model's own (10 for the bundled model).",
							"parameter_initial": [ 0 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Steps",
							"parameter_mmax": 200,
							"parameter_mmin": 0,
							"parameter_shortname": "Steps",
							"parameter_type": 1,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Steps"
				}
			},
			{
				"box": {
					"id": "obj-10",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 330.0, 40.0, 44.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 140.0, 20.0, 60.0, 18.0 ],
					"text": "Seed",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-11",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 330.0, 90.0, 56.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 140.0, 38.0, 60.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "The seed when Random is off; the same seed and settings give the same kick.",
							"parameter_initial": [ 0 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Seed",
							"parameter_mmax": 16777215.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Seed",
							"parameter_type": 0,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Seed"
				}
			},
			{
				"box": {
					"id": "obj-12",
					"maxclass": "live.toggle",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"parameter_enable": 1,
					"patching_rect": [ 450.0, 90.0, 15.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 140.0, 76.0, 15.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "On: a new random seed for each press (shown below; type it into Seed to get that kick again).",
							"parameter_initial": [ 1 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Random Seed",
							"parameter_mmax": 1,
							"parameter_shortname": "Random",
							"parameter_type": 2
						}
					},
					"varname": "KS Random Seed"
				}
			},
			{
				"box": {
					"id": "obj-13",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 470.0, 88.0, 50.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 158.0, 74.0, 50.0, 18.0 ],
					"text": "Random",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-14",
					"maxclass": "live.dial",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 20.0, 150.0, 44.0, 48.0 ],
					"presentation": 1,
					"presentation_rect": [ 214.0, 20.0, 44.0, 48.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Model control: length of the tail (0 short, 1 long).",
							"parameter_initial": [ 0.5 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Decay",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Decay",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Decay"
				}
			},
			{
				"box": {
					"id": "obj-15",
					"maxclass": "live.dial",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 150.0, 150.0, 44.0, 48.0 ],
					"presentation": 1,
					"presentation_rect": [ 262.0, 20.0, 44.0, 48.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Model control: body pitch (0 low, 1 high).",
							"parameter_initial": [ 0.5 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Pitch",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Pitch",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Pitch"
				}
			},
			{
				"box": {
					"id": "obj-16",
					"maxclass": "live.dial",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 280.0, 150.0, 44.0, 48.0 ],
					"presentation": 1,
					"presentation_rect": [ 310.0, 20.0, 44.0, 48.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Model control: transient click (0 soft, 1 hard).",
							"parameter_initial": [ 0.5 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Click",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Click",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Click"
				}
			},
			{
				"box": {
					"id": "obj-17",
					"maxclass": "live.dial",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 520.0, 150.0, 44.0, 48.0 ],
					"presentation": 1,
					"presentation_rect": [ 366.0, 20.0, 44.0, 48.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Vary: how far variations move from the last kick (0 same, 1 unrelated).",
							"parameter_initial": [ 0.5 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Strength",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Strength",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Strength"
				}
			},
			{
				"box": {
					"id": "obj-18",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 620.0, 230.0, 40.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 420.0, 20.0, 40.0, 18.0 ],
					"text": "Host",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-19",
					"keymode": 1,
					"lines": 1,
					"maxclass": "textedit",
					"numinlets": 1,
					"numoutlets": 4,
					"outlettype": [ "", "int", "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 620.0, 250.0, 100.0, 22.0 ],
					"presentation": 1,
					"presentation_rect": [ 420.0, 38.0, 110.0, 18.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_initial": [ "127.0.0.1" ],
							"parameter_initial_enable": 1,
							"parameter_invisible": 1,
							"parameter_longname": "KS Host",
							"parameter_shortname": "Host",
							"parameter_type": 3
						}
					},
					"text": "127.0.0.1",
					"varname": "KS Host",
					"wordwrap": 0
				}
			},
			{
				"box": {
					"id": "obj-20",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 740.0, 230.0, 40.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 420.0, 58.0, 40.0, 18.0 ],
					"text": "Port",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-21",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 740.0, 250.0, 50.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 420.0, 76.0, 50.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "The daemon's OSC port, 1 to 65535 (replies come back to port 9001 on this machine).",
							"parameter_initial": [ 9000 ],
							"parameter_initial_enable": 1,
							"parameter_invisible": 1,
							"parameter_longname": "KS Port",
							"parameter_mmax": 65535.0,
							"parameter_mmin": 1.0,
							"parameter_shortname": "Port",
							"parameter_type": 0,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Port"
				}
			},
			{
				"box": {
					"id": "obj-22",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 800.0, 250.0, 100.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 474.0, 74.0, 80.0, 18.0 ],
					"text": "replies on 9001",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-23",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 560.0, 520.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 100.0, 540.0, 20.0 ],
					"text": "no kick yet"
				}
			},
			{
				"box": {
					"id": "obj-24",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 590.0, 520.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 120.0, 540.0, 20.0 ],
					"text": "press Check to test the connection",
					"textcolor": [ 0.6, 0.6, 0.6, 1.0 ]
				}
			},
			{
				"box": {
					"id": "obj-25",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 620.0, 520.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 8.0, 140.0, 540.0, 20.0 ],
					"text": "",
					"textcolor": [ 1.0, 0.35, 0.3, 1.0 ]
				}
			},
			{
				"box": {
					"id": "obj-26",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "bang", "int", "int" ],
					"patching_rect": [ 620.0, 120.0, 117.0, 22.0 ],
					"text": "live.thisdevice"
				}
			},
			{
				"box": {
					"id": "obj-27",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 620.0, 150.0, 47.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-28",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 620.0, 180.0, 75.0, 22.0 ],
					"text": "delay 500"
				}
			},
			{
				"box": {
					"id": "obj-29",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 620.0, 210.0, 180.0, 22.0 ],
					"text": "/kick/ping, /kick/status"
				}
			},
			{
				"box": {
					"id": "obj-30",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 4,
					"outlettype": [ "bang", "bang", "bang", "bang" ],
					"patching_rect": [ 20.0, 250.0, 94.0, 22.0 ],
					"text": "t b b b b"
				}
			},
			{
				"box": {
					"id": "obj-31",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 110.0, 280.0, 110.0, 22.0 ],
					"text": "set working..."
				}
			},
			{
				"box": {
					"id": "obj-32",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 230.0, 280.0, 40.0, 22.0 ],
					"text": "set"
				}
			},
			{
				"box": {
					"id": "obj-33",
					"maxclass": "newobj",
					"numinlets": 6,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 330.0, 187.0, 22.0 ],
					"text": "pack 0 1 0 16 0.5 0.5"
				}
			},
			{
				"box": {
					"id": "obj-34",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 220.0, 330.0, 330.0, 20.0 ],
					"text": "first slot is a dummy: a bang there sends the stored values"
				}
			},
			{
				"box": {
					"id": "obj-35",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 330.0, 280.0, 68.0, 22.0 ],
					"text": "gate 1 1"
				}
			},
			{
				"box": {
					"id": "obj-36",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 330.0, 305.0, 117.0, 22.0 ],
					"text": "random 16777216"
				}
			},
			{
				"box": {
					"id": "obj-37",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 450.0, 305.0, 420.0, 20.0 ],
					"text": "Random on: a seed drawn here (below 2^24, so Live's Seed box holds it exactly)"
				}
			},
			{
				"box": {
					"id": "obj-38",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 450.0, 120.0, 47.0, 22.0 ],
					"text": "sel 0"
				}
			},
			{
				"box": {
					"id": "obj-39",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 440.0, 370.0, 22.0 ],
					"text": "/kick/generate $2 seed $3 steps $4 decay $5 click $6"
				}
			},
			{
				"box": {
					"id": "obj-40",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 4,
					"outlettype": [ "bang", "bang", "bang", "bang" ],
					"patching_rect": [ 180.0, 250.0, 94.0, 22.0 ],
					"text": "t b b b b"
				}
			},
			{
				"box": {
					"id": "obj-41",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 180.0, 290.0, 40.0, 22.0 ],
					"text": "i 0"
				}
			},
			{
				"box": {
					"id": "obj-42",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 180.0, 320.0, 47.0, 22.0 ],
					"text": "sel 0"
				}
			},
			{
				"box": {
					"id": "obj-43",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 260.0, 350.0, 229.0, 22.0 ],
					"text": "set error: press Generate first"
				}
			},
			{
				"box": {
					"id": "obj-44",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1180.0, 530.0, 40.0, 22.0 ],
					"text": "1"
				}
			},
			{
				"box": {
					"id": "obj-45",
					"maxclass": "newobj",
					"numinlets": 6,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 330.0, 145.0, 22.0 ],
					"text": "pack 0 s 0.5 1 0 16"
				}
			},
			{
				"box": {
					"id": "obj-46",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 440.0, 360.0, 22.0 ],
					"text": "/kick/variation $2 strength $3 count $4 seed $5 steps $6"
				}
			},
			{
				"box": {
					"id": "obj-47",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 560.0, 150.0, 280.0, 22.0 ],
					"text": "/kick/ping, /kick/status"
				}
			},
			{
				"box": {
					"id": "obj-48",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 620.0, 280.0, 82.0, 22.0 ],
					"text": "route text"
				}
			},
			{
				"box": {
					"id": "obj-49",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 620.0, 310.0, 96.0, 22.0 ],
					"text": "prepend host"
				}
			},
			{
				"box": {
					"id": "obj-50",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 740.0, 310.0, 96.0, 22.0 ],
					"text": "prepend port"
				}
			},
			{
				"box": {
					"id": "obj-51",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 620.0, 480.0, 166.0, 22.0 ],
					"text": "udpsend 127.0.0.1 9000"
				}
			},
			{
				"box": {
					"id": "obj-52",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 900.0, 480.0, 117.0, 22.0 ],
					"text": "udpreceive 9001"
				}
			},
			{
				"box": {
					"id": "obj-53",
					"maxclass": "newobj",
					"numinlets": 12,
					"numoutlets": 12,
					"outlettype": [ "", "", "", "", "", "", "", "", "", "", "", "" ],
					"patching_rect": [ 900.0, 510.0, 800.0, 22.0 ],
					"text": "route /kick/done /kick/error /kick/pong /kick/status /kick/controls /kick/map /kick/map/axes /kick/locate /kick/model /kick/map/proof /kick/kit/done"
				}
			},
			{
				"box": {
					"id": "obj-54",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "int", "", "int" ],
					"patching_rect": [ 900.0, 560.0, 96.0, 22.0 ],
					"text": "unpack 0 s 0"
				}
			},
			{
				"box": {
					"id": "obj-55",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 900.0, 590.0, 89.0, 22.0 ],
					"text": "prepend set"
				}
			},
			{
				"box": {
					"id": "obj-56",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1040.0, 560.0, 201.0, 22.0 ],
					"text": "set kick $1 ready - seed $3"
				}
			},
			{
				"box": {
					"id": "obj-57",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1250.0, 560.0, 40.0, 22.0 ],
					"text": "set"
				}
			},
			{
				"box": {
					"id": "obj-58",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1040.0, 610.0, 103.0, 22.0 ],
					"text": "set error: $2"
				}
			},
			{
				"box": {
					"id": "obj-59",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1160.0, 640.0, 124.0, 22.0 ],
					"text": "print kickserver"
				}
			},
			{
				"box": {
					"id": "obj-60",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1290.0, 610.0, 159.0, 22.0 ],
					"text": "set daemon $1 answers"
				}
			},
			{
				"box": {
					"id": "obj-61",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1290.0, 640.0, 290.0, 22.0 ],
					"text": "set model $1 on $2 - $3 queued - $4 generated"
				}
			},
			{
				"box": {
					"id": "obj-62",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1440.0, 560.0, 194.0, 22.0 ],
					"text": "print kickserver-unhandled"
				}
			},
			{
				"box": {
					"id": "obj-63",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 900.0, 120.0, 54.0, 22.0 ],
					"text": "midiin"
				}
			},
			{
				"box": {
					"id": "obj-64",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 900.0, 160.0, 61.0, 22.0 ],
					"text": "midiout"
				}
			},
			{
				"box": {
					"id": "obj-65",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 330.0, 112.0, 52.0, 22.0 ],
					"text": "round 1"
				}
			},
			{
				"box": {
					"id": "obj-66",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 390.0, 112.0, 32.0, 22.0 ],
					"text": "> 0"
				}
			},
			{
				"box": {
					"id": "obj-67",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 390.0, 138.0, 32.0, 22.0 ],
					"text": "+ 1"
				}
			},
			{
				"box": {
					"id": "obj-68",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 380.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-69",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 520.0, 380.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-70",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 410.0, 330.0, 22.0 ],
					"text": "/kick/generate $2 seed $3 decay $5 click $6"
				}
			},
			{
				"box": {
					"id": "obj-71",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 410.0, 280.0, 22.0 ],
					"text": "/kick/variation $2 strength $3 count $4 seed $5"
				}
			},
			{
				"box": {
					"id": "obj-72",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 800.0, 272.0, 52.0, 22.0 ],
					"text": "round 1"
				}
			},
			{
				"box": {
					"id": "obj-73",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 860.0, 272.0, 30.0, 22.0 ],
					"text": "i"
				}
			},
			{
				"box": {
					"id": "obj-74",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 470.0, 590.0, 20.0 ],
					"text": "Steps 0 opens the gates' left outlets: the messages without steps (the model's default); 1..200 the right ones, with steps"
				}
			},
			{
				"box": {
					"id": "obj-75",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 800.0, 296.0, 330.0, 20.0 ],
					"text": "Port and Seed are Float parameters shown as Int (Live's Int holds 0..255): rounded here"
				}
			},
			{
				"box": {
					"id": "obj-76",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 20.0, 700.0, 60.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 214.0, 74.0, 46.0, 16.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Mark the last kick as A, the start of a morph (its seed, or its file when no seed makes it).",
							"parameter_longname": "KS Set A",
							"parameter_mmax": 1,
							"parameter_shortname": "Set A",
							"parameter_type": 2
						}
					},
					"text": "Set A",
					"texton": "Set A",
					"varname": "KS Set A"
				}
			},
			{
				"box": {
					"id": "obj-77",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 300.0, 700.0, 60.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 264.0, 74.0, 50.0, 16.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Ask for Count kicks morphing from A to the last kick (/kick/interpolate), with the dials' settings.",
							"parameter_longname": "KS Morph",
							"parameter_mmax": 1,
							"parameter_shortname": "Morph",
							"parameter_type": 2
						}
					},
					"text": "Morph",
					"texton": "Morph",
					"varname": "KS Morph"
				}
			},
			{
				"box": {
					"id": "obj-78",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 120.0, 860.0, 300.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 318.0, 73.0, 98.0, 18.0 ],
					"text": "A: none",
					"textcolor": [ 0.6, 0.6, 0.6, 1.0 ]
				}
			},
			{
				"box": {
					"id": "obj-79",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1040.0, 700.0, 300.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 290.0, 2.0, 264.0, 18.0 ],
					"text": "dials: ?",
					"textcolor": [ 0.6, 0.6, 0.6, 1.0 ]
				}
			},
			{
				"box": {
					"id": "obj-80",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1040.0, 760.0, 40.0, 22.0 ],
					"text": "t l l"
				}
			},
			{
				"box": {
					"id": "obj-81",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "int", "", "int" ],
					"patching_rect": [ 1120.0, 790.0, 96.0, 22.0 ],
					"text": "unpack 0 s 0"
				}
			},
			{
				"box": {
					"id": "obj-82",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 1200.0, 820.0, 32.0, 22.0 ],
					"text": "< 0"
				}
			},
			{
				"box": {
					"id": "obj-83",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 1200.0, 850.0, 32.0, 22.0 ],
					"text": "+ 1"
				}
			},
			{
				"box": {
					"id": "obj-84",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1040.0, 880.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-85",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1040.0, 910.0, 40.0, 22.0 ],
					"text": "$3"
				}
			},
			{
				"box": {
					"id": "obj-86",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1120.0, 910.0, 40.0, 22.0 ],
					"text": "$2"
				}
			},
			{
				"box": {
					"id": "obj-87",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1040.0, 950.0, 50.0, 22.0 ],
					"text": "zl reg"
				}
			},
			{
				"box": {
					"id": "obj-88",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1120.0, 950.0, 50.0, 22.0 ],
					"text": "zl reg"
				}
			},
			{
				"box": {
					"id": "obj-89",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1240.0, 880.0, 420.0, 20.0 ],
					"text": "the last kick as an end: its seed, or its path when the reply's seed is -1"
				}
			},
			{
				"box": {
					"id": "obj-90",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 20.0, 730.0, 40.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-91",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 20.0, 760.0, 40.0, 22.0 ],
					"text": "i 0"
				}
			},
			{
				"box": {
					"id": "obj-92",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 20.0, 790.0, 47.0, 22.0 ],
					"text": "sel 0"
				}
			},
			{
				"box": {
					"id": "obj-93",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 80.0, 790.0, 30.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-94",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 900.0, 50.0, 22.0 ],
					"text": "zl reg"
				}
			},
			{
				"box": {
					"id": "obj-95",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 120.0, 830.0, 103.0, 22.0 ],
					"text": "prepend set A:"
				}
			},
			{
				"box": {
					"id": "obj-96",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 240.0, 830.0, 30.0, 22.0 ],
					"text": "1"
				}
			},
			{
				"box": {
					"id": "obj-97",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "bang", "bang", "bang" ],
					"patching_rect": [ 300.0, 730.0, 61.0, 22.0 ],
					"text": "t b b b"
				}
			},
			{
				"box": {
					"id": "obj-98",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 300.0, 760.0, 40.0, 22.0 ],
					"text": "i 0"
				}
			},
			{
				"box": {
					"id": "obj-99",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 300.0, 790.0, 47.0, 22.0 ],
					"text": "sel 0"
				}
			},
			{
				"box": {
					"id": "obj-100",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 360.0, 820.0, 280.0, 22.0 ],
					"text": "set error: press Set A first (after a kick)"
				}
			},
			{
				"box": {
					"id": "obj-101",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 4,
					"outlettype": [ "bang", "bang", "bang", "bang" ],
					"patching_rect": [ 300.0, 860.0, 94.0, 22.0 ],
					"text": "t b b b b"
				}
			},
			{
				"box": {
					"id": "obj-102",
					"maxclass": "newobj",
					"numinlets": 5,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 890.0, 166.0, 22.0 ],
					"text": "pack 0 1 0 0.5 0.5"
				}
			},
			{
				"box": {
					"id": "obj-103",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 520.0, 920.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-104",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 950.0, 230.0, 22.0 ],
					"text": "count $2 decay $4 click $5"
				}
			},
			{
				"box": {
					"id": "obj-105",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 980.0, 280.0, 22.0 ],
					"text": "count $2 steps $3 decay $4 click $5"
				}
			},
			{
				"box": {
					"id": "obj-106",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 410.0, 1010.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-107",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 410.0, 980.0, 68.0, 22.0 ],
					"text": "prepend b"
				}
			},
			{
				"box": {
					"id": "obj-108",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 300.0, 1040.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-109",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 300.0, 1010.0, 68.0, 22.0 ],
					"text": "prepend a"
				}
			},
			{
				"box": {
					"id": "obj-110",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 300.0, 1070.0, 166.0, 22.0 ],
					"text": "prepend /kick/interpolate"
				}
			},
			{
				"box": {
					"id": "obj-111",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 300.0, 1100.0, 560.0, 20.0 ],
					"text": "Morph: a [t b b b] fills the [zl join]s right to left: the dials and count (with or without steps), then b (the last kick), then a (A), then the address"
				}
			},
			{
				"box": {
					"id": "obj-112",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1040.0, 730.0, 124.0, 22.0 ],
					"text": "prepend set dials:"
				}
			},
			{
				"box": {
					"border": 1,
					"id": "obj-113",
					"local": 1,
					"maxclass": "lcd",
					"numinlets": 1,
					"numoutlets": 4,
					"outlettype": [ "list", "list", "int", "" ],
					"patching_rect": [ 20.0, 1180.0, 120.0, 120.0 ],
					"presentation": 1,
					"presentation_rect": [ 560.0, 20.0, 120.0, 120.0 ]
				}
			},
			{
				"box": {
					"id": "obj-114",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 160.0, 1180.0, 200.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 560.0, 2.0, 196.0, 18.0 ],
					"text": "y: press Check",
					"textcolor": [ 0.6, 0.6, 0.6, 1.0 ]
				}
			},
			{
				"box": {
					"id": "obj-115",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 160.0, 1204.0, 200.0, 20.0 ],
					"presentation": 1,
					"presentation_rect": [ 560.0, 142.0, 196.0, 18.0 ],
					"text": "x: the kit's map",
					"textcolor": [ 0.6, 0.6, 0.6, 1.0 ]
				}
			},
			{
				"box": {
					"id": "obj-116",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 380.0, 1180.0, 14.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 686.0, 19.0, 14.0, 18.0 ],
					"text": "X",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-117",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 400.0, 1180.0, 52.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 700.0, 20.0, 52.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "The pad's point, left (0) to right (1): moving it asks for kicks near the point.",
							"parameter_initial": [ 0.5 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Map X",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Map X",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Map X"
				}
			},
			{
				"box": {
					"id": "obj-118",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 460.0, 1180.0, 14.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 686.0, 37.0, 14.0, 18.0 ],
					"text": "Y",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-119",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 480.0, 1180.0, 52.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 700.0, 38.0, 52.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "The pad's point, bottom (0) to top (1): moving it asks for kicks near the point.",
							"parameter_initial": [ 0.5 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Map Y",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Map Y",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Map Y"
				}
			},
			{
				"box": {
					"id": "obj-120",
					"maxclass": "live.dial",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 560.0, 1180.0, 44.0, 48.0 ],
					"presentation": 1,
					"presentation_rect": [ 698.0, 56.0, 44.0, 48.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "How far kicks asked from the pad stray from its point: 0 the point's own kick, 1 far.",
							"parameter_initial": [ 0.2 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Spread",
							"parameter_mmax": 1.0,
							"parameter_mmin": 0.0,
							"parameter_shortname": "Spread",
							"parameter_type": 0,
							"parameter_unitstyle": 1
						}
					},
					"varname": "KS Spread"
				}
			},
			{
				"box": {
					"id": "obj-121",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 620.0, 1180.0, 66.0, 16.0 ],
					"presentation": 1,
					"presentation_rect": [ 686.0, 108.0, 66.0, 16.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Ask for Count kicks near the pad's point (the pad and the Map X/Y parameters also do, when moved).",
							"parameter_longname": "KS Near",
							"parameter_mmax": 1,
							"parameter_shortname": "Near",
							"parameter_type": 2
						}
					},
					"text": "Near",
					"texton": "Near",
					"varname": "KS Near"
				}
			},
			{
				"box": {
					"id": "obj-122",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 700.0, 1180.0, 66.0, 16.0 ],
					"presentation": 1,
					"presentation_rect": [ 686.0, 126.0, 66.0, 16.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Place the last kick on the map (/kick/locate): drawn as a white square.",
							"parameter_longname": "KS Locate",
							"parameter_mmax": 1,
							"parameter_shortname": "Locate",
							"parameter_type": 2
						}
					},
					"text": "Locate",
					"texton": "Locate",
					"varname": "KS Locate"
				}
			},
			{
				"box": {
					"id": "obj-123",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "int", "int" ],
					"patching_rect": [ 20.0, 1320.0, 82.0, 22.0 ],
					"text": "unpack 0 0"
				}
			},
			{
				"box": {
					"id": "obj-124",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1350.0, 138.0, 22.0 ],
					"text": "expr ($f1-4.)/112."
				}
			},
			{
				"box": {
					"id": "obj-125",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 180.0, 1350.0, 159.0, 22.0 ],
					"text": "expr 1.-($f1-4.)/112."
				}
			},
			{
				"box": {
					"id": "obj-126",
					"maxclass": "newobj",
					"numinlets": 3,
					"numoutlets": 1,
					"outlettype": [ "float" ],
					"patching_rect": [ 20.0, 1380.0, 82.0, 22.0 ],
					"text": "clip 0. 1."
				}
			},
			{
				"box": {
					"id": "obj-127",
					"maxclass": "newobj",
					"numinlets": 3,
					"numoutlets": 1,
					"outlettype": [ "float" ],
					"patching_rect": [ 180.0, 1380.0, 82.0, 22.0 ],
					"text": "clip 0. 1."
				}
			},
			{
				"box": {
					"id": "obj-128",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "float", "float" ],
					"patching_rect": [ 20.0, 1410.0, 47.0, 22.0 ],
					"text": "t f f"
				}
			},
			{
				"box": {
					"id": "obj-129",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "float", "float" ],
					"patching_rect": [ 180.0, 1410.0, 47.0, 22.0 ],
					"text": "t f f"
				}
			},
			{
				"box": {
					"id": "obj-130",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 80.0, 1440.0, 89.0, 22.0 ],
					"text": "prepend set"
				}
			},
			{
				"box": {
					"id": "obj-131",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 240.0, 1440.0, 89.0, 22.0 ],
					"text": "prepend set"
				}
			},
			{
				"box": {
					"id": "obj-132",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1480.0, 96.0, 22.0 ],
					"text": "pack 0.5 0.5"
				}
			},
			{
				"box": {
					"id": "obj-133",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 130.0, 1480.0, 520.0, 20.0 ],
					"text": "the point: the pad sets X and Y silently (set) and sends once; X or Y moved by automation or a mapping sends too"
				}
			},
			{
				"box": {
					"id": "obj-134",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "float" ],
					"patching_rect": [ 320.0, 1450.0, 47.0, 22.0 ],
					"text": "t b f"
				}
			},
			{
				"box": {
					"id": "obj-135",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 420.0, 1450.0, 40.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-136",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1510.0, 68.0, 22.0 ],
					"text": "gate 1 1"
				}
			},
			{
				"box": {
					"id": "obj-137",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 100.0, 1510.0, 420.0, 20.0 ],
					"text": "closed when the model has no kit map (/kick/controls ends with no-map)"
				}
			},
			{
				"box": {
					"id": "obj-138",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1540.0, 96.0, 22.0 ],
					"text": "speedlim 250"
				}
			},
			{
				"box": {
					"id": "obj-139",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 120.0, 1540.0, 640.0, 20.0 ],
					"text": "rate limit: at most one /kick/near per 250 ms x Count (4 kicks a second, about what the daemon makes on 2 CPU cores); the last position of a drag is sent when the time is up"
				}
			},
			{
				"box": {
					"id": "obj-140",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 420.0, 1510.0, 47.0, 22.0 ],
					"text": "* 250"
				}
			},
			{
				"box": {
					"id": "obj-141",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 6,
					"outlettype": [ "", "bang", "bang", "bang", "bang", "" ],
					"patching_rect": [ 20.0, 1620.0, 130.0, 22.0 ],
					"text": "t l b b b b l"
				}
			},
			{
				"box": {
					"id": "obj-142",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 320.0, 1650.0, 355.0, 22.0 ],
					"text": "expr 1+1001*int($f1*1000.+0.5)+int($f2*1000.+0.5)"
				}
			},
			{
				"box": {
					"id": "obj-143",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 320.0, 1676.0, 520.0, 20.0 ],
					"text": "id: 1 + 1001 x round(1000 x) + round(1000 y), so each /kick/done says where its kick was asked"
				}
			},
			{
				"box": {
					"id": "obj-144",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 180.0, 1650.0, 68.0, 22.0 ],
					"text": "gate 1 1"
				}
			},
			{
				"box": {
					"id": "obj-145",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 180.0, 1680.0, 117.0, 22.0 ],
					"text": "random 16777216"
				}
			},
			{
				"box": {
					"id": "obj-146",
					"maxclass": "newobj",
					"numinlets": 8,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 80.0, 1710.0, 222.0, 22.0 ],
					"text": "pack 0 1 0.2 0 0 0.5 0.5 0"
				}
			},
			{
				"box": {
					"id": "obj-147",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 320.0, 1710.0, 360.0, 20.0 ],
					"text": "dummy, count, spread, seed, id, decay, click, steps (the pitch: the pitch part)"
				}
			},
			{
				"box": {
					"id": "obj-148",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 80.0, 1740.0, 68.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-149",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 80.0, 1770.0, 425.0, 22.0 ],
					"text": "count $2 spread $3 seed $4 id $5 decay $6 click $7"
				}
			},
			{
				"box": {
					"id": "obj-150",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 80.0, 1800.0, 488.0, 22.0 ],
					"text": "count $2 spread $3 seed $4 id $5 steps $8 decay $6 click $7"
				}
			},
			{
				"box": {
					"id": "obj-151",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 1840.0, 61.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-152",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1870.0, 138.0, 22.0 ],
					"text": "prepend /kick/near"
				}
			},
			{
				"box": {
					"id": "obj-153",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 4,
					"outlettype": [ "", "", "", "" ],
					"patching_rect": [ 20.0, 1920.0, 75.0, 22.0 ],
					"text": "t l l l l"
				}
			},
			{
				"box": {
					"id": "obj-154",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1950.0, 124.0, 22.0 ],
					"text": "expr $f1*112.+1."
				}
			},
			{
				"box": {
					"id": "obj-155",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 150.0, 1950.0, 159.0, 22.0 ],
					"text": "expr (1.-$f2)*112.+1."
				}
			},
			{
				"box": {
					"id": "obj-156",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 310.0, 1950.0, 124.0, 22.0 ],
					"text": "expr $f1*112.+7."
				}
			},
			{
				"box": {
					"id": "obj-157",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 440.0, 1950.0, 159.0, 22.0 ],
					"text": "expr (1.-$f2)*112.+7."
				}
			},
			{
				"box": {
					"id": "obj-158",
					"maxclass": "newobj",
					"numinlets": 4,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 1980.0, 124.0, 22.0 ],
					"text": "pack 0. 0. 0. 0."
				}
			},
			{
				"box": {
					"id": "obj-159",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 3,
					"outlettype": [ "", "", "" ],
					"patching_rect": [ 20.0, 2010.0, 54.0, 22.0 ],
					"text": "gate 3"
				}
			},
			{
				"box": {
					"id": "obj-160",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 100.0, 2010.0, 460.0, 20.0 ],
					"text": "1: a kit kick, 2: a kick asked from the pad, 3: a kick located (/kick/locate)"
				}
			},
			{
				"box": {
					"id": "obj-161",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 2040.0, 243.0, 22.0 ],
					"text": "paintoval $1 $2 $3 $4 110 150 190"
				}
			},
			{
				"box": {
					"id": "obj-162",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 280.0, 2040.0, 236.0, 22.0 ],
					"text": "paintoval $1 $2 $3 $4 255 140 40"
				}
			},
			{
				"box": {
					"id": "obj-163",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 540.0, 2040.0, 243.0, 22.0 ],
					"text": "paintrect $1 $2 $3 $4 255 255 255"
				}
			},
			{
				"box": {
					"id": "obj-164",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2100.0, 54.0, 22.0 ],
					"text": "zl rev"
				}
			},
			{
				"box": {
					"id": "obj-165",
					"maxclass": "newobj",
					"numinlets": 3,
					"numoutlets": 3,
					"outlettype": [ "", "", "" ],
					"patching_rect": [ 20.0, 2130.0, 124.0, 22.0 ],
					"text": "route map no-map"
				}
			},
			{
				"box": {
					"id": "obj-166",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2190.0, 54.0, 22.0 ],
					"text": "zl rev"
				}
			},
			{
				"box": {
					"id": "obj-167",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "bang" ],
					"patching_rect": [ 20.0, 2160.0, 47.0, 22.0 ],
					"text": "t l b"
				}
			},
			{
				"box": {
					"id": "obj-168",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "bang" ],
					"patching_rect": [ 160.0, 2160.0, 47.0, 22.0 ],
					"text": "t l b"
				}
			},
			{
				"box": {
					"id": "obj-169",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 320.0, 2160.0, 47.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-170",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 380.0, 2190.0, 40.0, 22.0 ],
					"text": "1"
				}
			},
			{
				"box": {
					"id": "obj-171",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 320.0, 2220.0, 75.0, 22.0 ],
					"text": "/kick/map"
				}
			},
			{
				"box": {
					"id": "obj-172",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "bang", "bang", "bang" ],
					"patching_rect": [ 460.0, 2160.0, 61.0, 22.0 ],
					"text": "t b b b"
				}
			},
			{
				"box": {
					"id": "obj-173",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 580.0, 2190.0, 40.0, 22.0 ],
					"text": "0"
				}
			},
			{
				"box": {
					"id": "obj-174",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 460.0, 2250.0, 600.0, 22.0 ],
					"text": "clear, paintrect 0 0 120 120 70 70 70, frgb 200 200 200, moveto 8 56, write no kit map, moveto 8 70, write in this model"
				}
			},
			{
				"box": {
					"id": "obj-175",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 460.0, 2280.0, 278.0, 22.0 ],
					"text": "set x: none (the model has no kit map)"
				}
			},
			{
				"box": {
					"id": "obj-176",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 760.0, 2280.0, 89.0, 22.0 ],
					"text": "set y: none"
				}
			},
			{
				"box": {
					"id": "obj-177",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "", "", "" ],
					"patching_rect": [ 20.0, 2330.0, 61.0, 22.0 ],
					"text": "t l l l"
				}
			},
			{
				"box": {
					"id": "obj-178",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 320.0, 2360.0, 194.0, 22.0 ],
					"text": "set kit map: part $1 of $2"
				}
			},
			{
				"box": {
					"id": "obj-179",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 170.0, 2360.0, 82.0, 22.0 ],
					"text": "zl slice 1"
				}
			},
			{
				"box": {
					"id": "obj-180",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 170.0, 2390.0, 47.0, 22.0 ],
					"text": "sel 1"
				}
			},
			{
				"box": {
					"id": "obj-181",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 170.0, 2420.0, 271.0, 22.0 ],
					"text": "clear, paintrect 0 0 120 120 40 40 40"
				}
			},
			{
				"box": {
					"id": "obj-182",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2450.0, 194.0, 22.0 ],
					"text": "zl slice 2 @zlmaxsize 1024"
				}
			},
			{
				"box": {
					"id": "obj-183",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2480.0, 187.0, 22.0 ],
					"text": "zl iter 3 @zlmaxsize 1024"
				}
			},
			{
				"box": {
					"id": "obj-184",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2510.0, 82.0, 22.0 ],
					"text": "zl slice 2"
				}
			},
			{
				"box": {
					"id": "obj-185",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "int" ],
					"patching_rect": [ 20.0, 2540.0, 47.0, 22.0 ],
					"text": "t l 1"
				}
			},
			{
				"box": {
					"id": "obj-186",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 240.0, 2450.0, 520.0, 20.0 ],
					"text": "a datagram holds at most about 270 points (4096 bytes): zl's default 256 atoms would cut it"
				}
			},
			{
				"box": {
					"id": "obj-187",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 520.0, 2330.0, 75.0, 22.0 ],
					"text": "set x: $1"
				}
			},
			{
				"box": {
					"id": "obj-188",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 620.0, 2330.0, 75.0, 22.0 ],
					"text": "set y: $2"
				}
			},
			{
				"box": {
					"id": "obj-189",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2580.0, 47.0, 22.0 ],
					"text": "t l l"
				}
			},
			{
				"box": {
					"id": "obj-190",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 170.0, 2610.0, 187.0, 22.0 ],
					"text": "set located $3 on the map"
				}
			},
			{
				"box": {
					"id": "obj-191",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 2610.0, 82.0, 22.0 ],
					"text": "zl slice 2"
				}
			},
			{
				"box": {
					"id": "obj-192",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "int" ],
					"patching_rect": [ 20.0, 2640.0, 47.0, 22.0 ],
					"text": "t l 3"
				}
			},
			{
				"box": {
					"id": "obj-193",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 420.0, 2580.0, 61.0, 22.0 ],
					"text": "moses 1"
				}
			},
			{
				"box": {
					"id": "obj-194",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "float", "float" ],
					"patching_rect": [ 420.0, 2610.0, 47.0, 22.0 ],
					"text": "t f f"
				}
			},
			{
				"box": {
					"id": "obj-195",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 420.0, 2640.0, 222.0, 22.0 ],
					"text": "expr int(($f1-1.)/1001.)/1000."
				}
			},
			{
				"box": {
					"id": "obj-196",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 640.0, 2640.0, 341.0, 22.0 ],
					"text": "expr (($f1-1.)-1001.*int(($f1-1.)/1001.))/1000."
				}
			},
			{
				"box": {
					"id": "obj-197",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 420.0, 2670.0, 82.0, 22.0 ],
					"text": "pack 0. 0."
				}
			},
			{
				"box": {
					"id": "obj-198",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "int" ],
					"patching_rect": [ 420.0, 2700.0, 47.0, 22.0 ],
					"text": "t l 2"
				}
			},
			{
				"box": {
					"id": "obj-199",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 20.0, 2770.0, 138.0, 22.0 ],
					"text": "set now serving $1"
				}
			},
			{
				"box": {
					"id": "obj-200",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 220.0, 2830.0, 110.0, 22.0 ],
					"text": "/kick/controls"
				}
			},
			{
				"box": {
					"id": "obj-201",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 220.0, 2770.0, 40.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-202",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 420.0, 2740.0, 82.0, 22.0 ],
					"text": "zl slice 1"
				}
			},
			{
				"box": {
					"id": "obj-203",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 420.0, 2770.0, 75.0, 22.0 ],
					"text": "zl change"
				}
			},
			{
				"box": {
					"id": "obj-204",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 420.0, 2800.0, 40.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-205",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 20.0, 2860.0, 700.0, 20.0 ],
					"text": "/kick/controls (and with it /kick/map) is asked once /kick/status names a model it has not named before (at load; at Check, which forgets it; after a swap) and after a /kick/model reply"
				}
			},
			{
				"box": {
					"id": "obj-206",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 620.0, 2740.0, 47.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-207",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 680.0, 2770.0, 61.0, 22.0 ],
					"text": "zlclear"
				}
			},
			{
				"box": {
					"id": "obj-208",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 20.0, 2880.0, 47.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-209",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 20.0, 2910.0, 40.0, 22.0 ],
					"text": "i 0"
				}
			},
			{
				"box": {
					"id": "obj-210",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 20.0, 2940.0, 47.0, 22.0 ],
					"text": "sel 0"
				}
			},
			{
				"box": {
					"id": "obj-211",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 80.0, 2970.0, 40.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-212",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 80.0, 3000.0, 54.0, 22.0 ],
					"text": "zl reg"
				}
			},
			{
				"box": {
					"id": "obj-213",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 80.0, 3030.0, 152.0, 22.0 ],
					"text": "prepend /kick/locate"
				}
			},
			{
				"box": {
					"id": "obj-300",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 3,
					"outlettype": [ "bang", "bang", "int" ],
					"patching_rect": [ 1700.0, 540.0, 76.0, 22.0 ],
					"text": "t b b i"
				}
			},
			{
				"box": {
					"id": "obj-301",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1700.0, 570.0, 100.0, 22.0 ],
					"text": "/kick/proof $1"
				}
			},
			{
				"box": {
					"id": "obj-303",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1750.0, 610.0, 260.0, 22.0 ],
					"text": "set map: proving this address to the daemon"
				}
			},
			{
				"box": {
					"id": "obj-302",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1600.0, 570.0, 70.0, 22.0 ],
					"text": "/kick/map"
				}
			},
			{
				"box": {
					"id": "obj-400",
					"maxclass": "live.text",
					"mode": 0,
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"parameter_enable": 1,
					"patching_rect": [ 1300.0, 60.0, 72.0, 30.0 ],
					"presentation": 1,
					"presentation_rect": [ 764.0, 22.0, 88.0, 30.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_enum": [ "off", "on" ],
							"parameter_info": "Ask the daemon for the last kick as a kit: Layers x Robins hits in one folder (/kick/kit).",
							"parameter_longname": "KS Kit",
							"parameter_mmax": 1,
							"parameter_shortname": "Kit",
							"parameter_type": 2
						}
					},
					"text": "Kit",
					"texton": "Kit",
					"varname": "KS Kit"
				}
			},
			{
				"box": {
					"id": "obj-401",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1700.0, 40.0, 44.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 764.0, 54.0, 44.0, 18.0 ],
					"text": "Layers",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-402",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 1400.0, 120.0, 44.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 764.0, 72.0, 40.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Velocity layers of a kit (1 to 8).",
							"parameter_initial": [ 4 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Layers",
							"parameter_mmax": 8,
							"parameter_mmin": 1,
							"parameter_shortname": "Layers",
							"parameter_type": 1,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Layers"
				}
			},
			{
				"box": {
					"id": "obj-403",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1700.0, 80.0, 44.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 810.0, 54.0, 44.0, 18.0 ],
					"text": "Robins",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-404",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 1500.0, 120.0, 44.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 810.0, 72.0, 40.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "Round robins per layer of a kit (1 to 4).",
							"parameter_initial": [ 2 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Robins",
							"parameter_mmax": 4,
							"parameter_mmin": 1,
							"parameter_shortname": "Robins",
							"parameter_type": 1,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Robins"
				}
			},
			{
				"box": {
					"id": "obj-405",
					"maxclass": "live.comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1700.0, 120.0, 44.0, 18.0 ],
					"presentation": 1,
					"presentation_rect": [ 764.0, 90.0, 44.0, 18.0 ],
					"text": "Note",
					"textjustification": 0
				}
			},
			{
				"box": {
					"id": "obj-406",
					"maxclass": "live.numbox",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "", "float" ],
					"parameter_enable": 1,
					"patching_rect": [ 1600.0, 120.0, 44.0, 15.0 ],
					"presentation": 1,
					"presentation_rect": [ 764.0, 108.0, 40.0, 15.0 ],
					"saved_attribute_attributes": {
						"valueof": {
							"parameter_info": "The pitch as a MIDI note number (33 is A1, 55 Hz) for Generate, Vary, Near, Morph and Kit, in place of the Pitch dial; 0: none (the dial). For a model that takes units (the kick-synth); others refuse a note.",
							"parameter_initial": [ 0 ],
							"parameter_initial_enable": 1,
							"parameter_longname": "KS Note",
							"parameter_mmax": 127,
							"parameter_mmin": 0,
							"parameter_shortname": "Note",
							"parameter_type": 1,
							"parameter_unitstyle": 0
						}
					},
					"varname": "KS Note"
				}
			},
			{
				"box": {
					"id": "obj-410",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 2,
					"outlettype": [ "bang", "bang" ],
					"patching_rect": [ 1300.0, 160.0, 40.0, 22.0 ],
					"text": "t b b"
				}
			},
			{
				"box": {
					"id": "obj-411",
					"maxclass": "newobj",
					"numinlets": 4,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1400.0, 200.0, 90.0, 22.0 ],
					"text": "pack 0 4 2 0"
				}
			},
			{
				"box": {
					"id": "obj-412",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 1600.0, 140.0, 30.0, 22.0 ],
					"text": "> 0"
				}
			},
			{
				"box": {
					"id": "obj-413",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 1600.0, 170.0, 30.0, 22.0 ],
					"text": "+ 1"
				}
			},
			{
				"box": {
					"id": "obj-414",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1400.0, 230.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-415",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1400.0, 260.0, 120.0, 22.0 ],
					"text": "layers $2 robins $3"
				}
			},
			{
				"box": {
					"id": "obj-416",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1530.0, 260.0, 160.0, 22.0 ],
					"text": "layers $2 robins $3 note $4"
				}
			},
			{
				"box": {
					"id": "obj-417",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1300.0, 300.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-418",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "int" ],
					"patching_rect": [ 1300.0, 190.0, 30.0, 22.0 ],
					"text": "i 0"
				}
			},
			{
				"box": {
					"id": "obj-419",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "bang", "" ],
					"patching_rect": [ 1300.0, 220.0, 40.0, 22.0 ],
					"text": "sel 0"
				}
			},
			{
				"box": {
					"id": "obj-420",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "bang" ],
					"patching_rect": [ 1340.0, 250.0, 30.0, 22.0 ],
					"text": "t b"
				}
			},
			{
				"box": {
					"id": "obj-421",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1340.0, 275.0, 50.0, 22.0 ],
					"text": "zl reg"
				}
			},
			{
				"box": {
					"id": "obj-422",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1340.0, 300.0, 90.0, 22.0 ],
					"text": "prepend source"
				}
			},
			{
				"box": {
					"id": "obj-423",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1300.0, 330.0, 100.0, 22.0 ],
					"text": "prepend /kick/kit"
				}
			},
			{
				"box": {
					"id": "obj-424",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1500.0, 400.0, 140.0, 22.0 ],
					"text": "set kit $2 - $3 layers x $4 robins"
				}
			},
			{
				"box": {
					"id": "obj-430",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 1800.0, 220.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-431",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1900.0, 160.0, 110.0, 22.0 ],
					"text": "prepend set pitch"
				}
			},
			{
				"box": {
					"id": "obj-432",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1660.0, 160.0, 104.0, 22.0 ],
					"text": "prepend set note"
				}
			},
			{
				"box": {
					"id": "obj-433",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1900.0, 260.0, 80.0, 22.0 ],
					"text": "pitch 0.5"
				}
			},
			{
				"box": {
					"id": "obj-434",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1800.0, 260.0, 60.0, 22.0 ],
					"text": "note 0"
				}
			},
			{
				"box": {
					"id": "obj-435",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1800.0, 300.0, 560.0, 20.0 ],
					"text": "the pitch part of Generate, Vary, Near and Morph: note N when KS Note is above 0, else pitch <the dial> (Vary: none); each press bangs the gate first, so the [zl join]s' right inlets hold it"
				}
			},
			{
				"box": {
					"id": "obj-436",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 20.0, 490.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-437",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 460.0, 440.0, 60.0, 22.0 ],
					"text": "gate 2 1"
				}
			},
			{
				"box": {
					"id": "obj-438",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 590.0, 530.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-439",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 578.0, 1800.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-440",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 2,
					"outlettype": [ "", "" ],
					"patching_rect": [ 810.0, 980.0, 50.0, 22.0 ],
					"text": "zl join"
				}
			},
			{
				"box": {
					"id": "obj-441",
					"maxclass": "newobj",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1700.0, 510.0, 50.0, 22.0 ],
					"text": "gate 1 1"
				}
			},
			{
				"box": {
					"id": "obj-442",
					"maxclass": "message",
					"numinlets": 2,
					"numoutlets": 1,
					"outlettype": [ "" ],
					"patching_rect": [ 1650.0, 540.0, 30.0, 22.0 ],
					"text": "0"
				}
			},
			{
				"box": {
					"id": "obj-443",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1810.0, 510.0, 560.0, 20.0 ],
					"text": "a map proof is answered once per map asked: the gate closes after the echo and opens when the device asks /kick/map itself (a daemon that keeps refusing gets no endless echo)"
				}
			},
			{
				"box": {
					"id": "obj-444",
					"maxclass": "newobj",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1010.0, 650.0, 140.0, 22.0 ],
					"text": "s kickserver-last-kick"
				}
			},
			{
				"box": {
					"id": "obj-445",
					"maxclass": "comment",
					"numinlets": 1,
					"numoutlets": 0,
					"patching_rect": [ 1160.0, 680.0, 560.0, 20.0 ],
					"text": "each kick's path, for kickserver-audition.amxd (an audio effect on any track: a MIDI effect has no audio out); no '---' in the name, so Live shares it between devices"
				}
			}
		],
		"lines": [
			{
				"patchline": {
					"destination": [ "obj-303", 0 ],
					"source": [ "obj-53", 9 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-303", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-301", 0 ],
					"source": [ "obj-300", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-302", 0 ],
					"source": [ "obj-300", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-301", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-302", 0 ]
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
					"destination": [ "obj-19", 0 ],
					"source": [ "obj-27", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-21", 0 ],
					"source": [ "obj-27", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-28", 0 ],
					"source": [ "obj-27", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-29", 0 ],
					"source": [ "obj-28", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-29", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-30", 0 ],
					"source": [ "obj-3", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-31", 0 ],
					"source": [ "obj-30", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-32", 0 ],
					"source": [ "obj-30", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-35", 1 ],
					"source": [ "obj-30", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 0 ],
					"source": [ "obj-30", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 1 ],
					"source": [ "obj-7", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 3 ],
					"source": [ "obj-9", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 4 ],
					"source": [ "obj-14", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 5 ],
					"source": [ "obj-16", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-35", 0 ],
					"source": [ "obj-12", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-36", 0 ],
					"source": [ "obj-35", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 2 ],
					"source": [ "obj-36", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 4 ],
					"source": [ "obj-36", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-38", 0 ],
					"source": [ "obj-12", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-11", 0 ],
					"source": [ "obj-38", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-40", 0 ],
					"source": [ "obj-4", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-31", 0 ],
					"source": [ "obj-40", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-32", 0 ],
					"source": [ "obj-40", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-35", 1 ],
					"source": [ "obj-40", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-41", 0 ],
					"source": [ "obj-40", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-42", 0 ],
					"source": [ "obj-41", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-43", 0 ],
					"source": [ "obj-42", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 0 ],
					"source": [ "obj-43", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 0 ],
					"source": [ "obj-42", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-44", 0 ],
					"source": [ "obj-53", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-41", 1 ],
					"source": [ "obj-44", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 1 ],
					"source": [ "obj-54", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 2 ],
					"source": [ "obj-17", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 3 ],
					"source": [ "obj-7", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 5 ],
					"source": [ "obj-9", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-47", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-48", 0 ],
					"source": [ "obj-19", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-49", 0 ],
					"source": [ "obj-48", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-49", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-50", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-31", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 0 ],
					"source": [ "obj-32", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-53", 0 ],
					"source": [ "obj-52", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-54", 0 ],
					"source": [ "obj-53", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-55", 0 ],
					"source": [ "obj-54", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-23", 0 ],
					"source": [ "obj-55", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-56", 0 ],
					"source": [ "obj-53", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-56", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-57", 0 ],
					"source": [ "obj-53", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 0 ],
					"source": [ "obj-57", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-58", 0 ],
					"source": [ "obj-53", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-59", 0 ],
					"source": [ "obj-53", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 0 ],
					"source": [ "obj-58", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-60", 0 ],
					"source": [ "obj-53", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-60", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-61", 0 ],
					"source": [ "obj-53", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-61", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-64", 0 ],
					"source": [ "obj-63", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-68", 1 ],
					"source": [ "obj-33", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-70", 0 ],
					"source": [ "obj-68", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-39", 0 ],
					"source": [ "obj-68", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-69", 1 ],
					"source": [ "obj-45", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-71", 0 ],
					"source": [ "obj-69", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-46", 0 ],
					"source": [ "obj-69", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-66", 0 ],
					"source": [ "obj-9", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-67", 0 ],
					"source": [ "obj-66", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-68", 0 ],
					"source": [ "obj-67", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-69", 0 ],
					"source": [ "obj-67", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-65", 0 ],
					"source": [ "obj-11", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-33", 2 ],
					"source": [ "obj-65", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-45", 4 ],
					"source": [ "obj-65", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-72", 0 ],
					"source": [ "obj-21", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-73", 0 ],
					"source": [ "obj-72", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-50", 0 ],
					"source": [ "obj-73", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-80", 0 ],
					"source": [ "obj-53", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-81", 0 ],
					"source": [ "obj-80", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-82", 0 ],
					"source": [ "obj-81", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-83", 0 ],
					"source": [ "obj-82", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-84", 0 ],
					"source": [ "obj-83", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-84", 1 ],
					"source": [ "obj-80", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-85", 0 ],
					"source": [ "obj-84", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-86", 0 ],
					"source": [ "obj-84", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-87", 1 ],
					"source": [ "obj-85", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-88", 1 ],
					"source": [ "obj-85", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-87", 1 ],
					"source": [ "obj-86", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-88", 1 ],
					"source": [ "obj-86", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-90", 0 ],
					"source": [ "obj-76", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-32", 0 ],
					"source": [ "obj-90", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-91", 0 ],
					"source": [ "obj-90", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-91", 1 ],
					"source": [ "obj-44", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-92", 0 ],
					"source": [ "obj-91", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-43", 0 ],
					"source": [ "obj-92", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-93", 0 ],
					"source": [ "obj-92", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-87", 0 ],
					"source": [ "obj-93", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-94", 1 ],
					"source": [ "obj-87", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-95", 0 ],
					"source": [ "obj-87", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-78", 0 ],
					"source": [ "obj-95", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-96", 0 ],
					"source": [ "obj-87", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-98", 1 ],
					"source": [ "obj-96", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-97", 0 ],
					"source": [ "obj-77", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-31", 0 ],
					"source": [ "obj-97", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-32", 0 ],
					"source": [ "obj-97", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-98", 0 ],
					"source": [ "obj-97", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-99", 0 ],
					"source": [ "obj-98", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-100", 0 ],
					"source": [ "obj-99", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-25", 0 ],
					"source": [ "obj-100", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-101", 0 ],
					"source": [ "obj-99", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-102", 0 ],
					"source": [ "obj-101", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-102", 1 ],
					"source": [ "obj-7", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-102", 2 ],
					"source": [ "obj-9", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-102", 3 ],
					"source": [ "obj-14", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-102", 4 ],
					"source": [ "obj-16", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-103", 1 ],
					"source": [ "obj-102", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-103", 0 ],
					"source": [ "obj-67", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-104", 0 ],
					"source": [ "obj-103", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-105", 0 ],
					"source": [ "obj-103", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-88", 0 ],
					"source": [ "obj-101", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-107", 0 ],
					"source": [ "obj-88", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-106", 0 ],
					"source": [ "obj-107", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-108", 1 ],
					"source": [ "obj-106", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-94", 0 ],
					"source": [ "obj-101", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-109", 0 ],
					"source": [ "obj-94", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-108", 0 ],
					"source": [ "obj-109", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-110", 0 ],
					"source": [ "obj-108", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-110", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-79", 0 ],
					"source": [ "obj-112", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-123", 0 ],
					"source": [ "obj-113", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-124", 0 ],
					"source": [ "obj-123", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-125", 0 ],
					"source": [ "obj-123", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-126", 0 ],
					"source": [ "obj-124", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-127", 0 ],
					"source": [ "obj-125", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-128", 0 ],
					"source": [ "obj-126", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-129", 0 ],
					"source": [ "obj-127", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-130", 0 ],
					"source": [ "obj-128", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-131", 0 ],
					"source": [ "obj-129", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-117", 0 ],
					"source": [ "obj-130", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-119", 0 ],
					"source": [ "obj-131", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-132", 1 ],
					"source": [ "obj-129", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-132", 0 ],
					"source": [ "obj-128", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-132", 0 ],
					"source": [ "obj-117", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-134", 0 ],
					"source": [ "obj-119", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-132", 1 ],
					"source": [ "obj-134", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-132", 0 ],
					"source": [ "obj-134", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-135", 0 ],
					"source": [ "obj-121", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-132", 0 ],
					"source": [ "obj-135", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-136", 1 ],
					"source": [ "obj-132", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-138", 0 ],
					"source": [ "obj-136", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-140", 0 ],
					"source": [ "obj-7", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-138", 1 ],
					"source": [ "obj-140", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-141", 0 ],
					"source": [ "obj-138", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-142", 0 ],
					"source": [ "obj-141", 5 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-31", 0 ],
					"source": [ "obj-141", 4 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-32", 0 ],
					"source": [ "obj-141", 4 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-144", 0 ],
					"source": [ "obj-12", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-144", 1 ],
					"source": [ "obj-141", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-145", 0 ],
					"source": [ "obj-144", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 0 ],
					"source": [ "obj-141", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 1 ],
					"source": [ "obj-7", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 2 ],
					"source": [ "obj-120", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 3 ],
					"source": [ "obj-145", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 3 ],
					"source": [ "obj-65", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 4 ],
					"source": [ "obj-142", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 5 ],
					"source": [ "obj-14", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 6 ],
					"source": [ "obj-16", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-146", 7 ],
					"source": [ "obj-9", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-148", 0 ],
					"source": [ "obj-67", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-148", 1 ],
					"source": [ "obj-146", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-149", 0 ],
					"source": [ "obj-148", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-150", 0 ],
					"source": [ "obj-148", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-151", 0 ],
					"source": [ "obj-141", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-152", 0 ],
					"source": [ "obj-151", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-152", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-154", 0 ],
					"source": [ "obj-153", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-158", 0 ],
					"source": [ "obj-154", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-155", 0 ],
					"source": [ "obj-153", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-158", 1 ],
					"source": [ "obj-155", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-156", 0 ],
					"source": [ "obj-153", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-158", 2 ],
					"source": [ "obj-156", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-157", 0 ],
					"source": [ "obj-153", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-158", 3 ],
					"source": [ "obj-157", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-159", 1 ],
					"source": [ "obj-158", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-161", 0 ],
					"source": [ "obj-159", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-113", 0 ],
					"source": [ "obj-161", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-162", 0 ],
					"source": [ "obj-159", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-113", 0 ],
					"source": [ "obj-162", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-163", 0 ],
					"source": [ "obj-159", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-113", 0 ],
					"source": [ "obj-163", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-62", 0 ],
					"source": [ "obj-53", 11 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-164", 0 ],
					"source": [ "obj-53", 4 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-165", 0 ],
					"source": [ "obj-164", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-112", 0 ],
					"source": [ "obj-166", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-167", 0 ],
					"source": [ "obj-165", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-168", 0 ],
					"source": [ "obj-165", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-166", 0 ],
					"source": [ "obj-165", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-166", 0 ],
					"source": [ "obj-167", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-166", 0 ],
					"source": [ "obj-168", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-169", 0 ],
					"source": [ "obj-167", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-170", 0 ],
					"source": [ "obj-169", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-136", 0 ],
					"source": [ "obj-170", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-171", 0 ],
					"source": [ "obj-169", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-171", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-172", 0 ],
					"source": [ "obj-168", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-173", 0 ],
					"source": [ "obj-172", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-136", 0 ],
					"source": [ "obj-173", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-174", 0 ],
					"source": [ "obj-172", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-113", 0 ],
					"source": [ "obj-174", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-175", 0 ],
					"source": [ "obj-172", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-176", 0 ],
					"source": [ "obj-172", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-115", 0 ],
					"source": [ "obj-175", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-114", 0 ],
					"source": [ "obj-176", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-177", 0 ],
					"source": [ "obj-53", 5 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-178", 0 ],
					"source": [ "obj-177", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-178", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-179", 0 ],
					"source": [ "obj-177", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-180", 0 ],
					"source": [ "obj-179", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-181", 0 ],
					"source": [ "obj-180", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-113", 0 ],
					"source": [ "obj-181", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-182", 0 ],
					"source": [ "obj-177", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-183", 0 ],
					"source": [ "obj-182", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-184", 0 ],
					"source": [ "obj-183", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-159", 0 ],
					"source": [ "obj-185", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-153", 0 ],
					"source": [ "obj-185", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-185", 0 ],
					"source": [ "obj-184", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-187", 0 ],
					"source": [ "obj-53", 6 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-188", 0 ],
					"source": [ "obj-53", 6 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-115", 0 ],
					"source": [ "obj-187", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-114", 0 ],
					"source": [ "obj-188", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-189", 0 ],
					"source": [ "obj-53", 7 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-190", 0 ],
					"source": [ "obj-189", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-190", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-191", 0 ],
					"source": [ "obj-189", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-159", 0 ],
					"source": [ "obj-192", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-153", 0 ],
					"source": [ "obj-192", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-192", 0 ],
					"source": [ "obj-191", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-193", 0 ],
					"source": [ "obj-54", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-194", 0 ],
					"source": [ "obj-193", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-196", 0 ],
					"source": [ "obj-194", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-195", 0 ],
					"source": [ "obj-194", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-197", 1 ],
					"source": [ "obj-196", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-197", 0 ],
					"source": [ "obj-195", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-159", 0 ],
					"source": [ "obj-198", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-153", 0 ],
					"source": [ "obj-198", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-198", 0 ],
					"source": [ "obj-197", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-199", 0 ],
					"source": [ "obj-53", 8 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-24", 0 ],
					"source": [ "obj-199", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-200", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-201", 0 ],
					"source": [ "obj-53", 8 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-200", 0 ],
					"source": [ "obj-201", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-202", 0 ],
					"source": [ "obj-53", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-203", 0 ],
					"source": [ "obj-202", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-204", 0 ],
					"source": [ "obj-203", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-200", 0 ],
					"source": [ "obj-204", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-206", 0 ],
					"source": [ "obj-5", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-207", 0 ],
					"source": [ "obj-206", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-203", 0 ],
					"source": [ "obj-207", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-47", 0 ],
					"source": [ "obj-206", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-208", 0 ],
					"source": [ "obj-122", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-32", 0 ],
					"source": [ "obj-208", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-209", 1 ],
					"source": [ "obj-44", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-209", 0 ],
					"source": [ "obj-208", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-210", 0 ],
					"source": [ "obj-209", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-43", 0 ],
					"source": [ "obj-210", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-211", 0 ],
					"source": [ "obj-210", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-212", 1 ],
					"source": [ "obj-54", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-212", 0 ],
					"source": [ "obj-211", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-213", 0 ],
					"source": [ "obj-212", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-213", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-410", 0 ],
					"source": [ "obj-400", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-411", 0 ],
					"source": [ "obj-410", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-411", 1 ],
					"source": [ "obj-402", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-411", 2 ],
					"source": [ "obj-404", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-411", 3 ],
					"source": [ "obj-406", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-412", 0 ],
					"source": [ "obj-406", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-413", 0 ],
					"source": [ "obj-412", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-414", 0 ],
					"source": [ "obj-413", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-414", 1 ],
					"source": [ "obj-411", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-415", 0 ],
					"source": [ "obj-414", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-416", 0 ],
					"source": [ "obj-414", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-417", 1 ],
					"source": [ "obj-415", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-417", 1 ],
					"source": [ "obj-416", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-418", 0 ],
					"source": [ "obj-410", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-418", 1 ],
					"source": [ "obj-44", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-419", 0 ],
					"source": [ "obj-418", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-43", 0 ],
					"source": [ "obj-419", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-420", 0 ],
					"source": [ "obj-419", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-421", 0 ],
					"source": [ "obj-420", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-421", 1 ],
					"source": [ "obj-54", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-422", 0 ],
					"source": [ "obj-421", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-417", 0 ],
					"source": [ "obj-422", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-423", 0 ],
					"source": [ "obj-417", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-423", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-424", 0 ],
					"source": [ "obj-53", 10 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-23", 0 ],
					"source": [ "obj-424", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-431", 0 ],
					"source": [ "obj-15", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-433", 0 ],
					"source": [ "obj-431", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-432", 0 ],
					"source": [ "obj-406", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-434", 0 ],
					"source": [ "obj-432", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-430", 0 ],
					"source": [ "obj-413", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-433", 0 ],
					"source": [ "obj-430", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-434", 0 ],
					"source": [ "obj-430", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-430", 1 ],
					"source": [ "obj-30", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-436", 0 ],
					"source": [ "obj-70", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-436", 0 ],
					"source": [ "obj-39", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-436", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-430", 1 ],
					"source": [ "obj-40", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-437", 1 ],
					"source": [ "obj-71", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-437", 1 ],
					"source": [ "obj-46", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-437", 0 ],
					"source": [ "obj-413", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-437", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-438", 0 ],
					"source": [ "obj-437", 1 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-51", 0 ],
					"source": [ "obj-438", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-438", 1 ],
					"source": [ "obj-434", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-430", 1 ],
					"source": [ "obj-141", 2 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-439", 0 ],
					"source": [ "obj-149", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-439", 0 ],
					"source": [ "obj-150", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-151", 1 ],
					"source": [ "obj-439", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-430", 1 ],
					"source": [ "obj-101", 3 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-440", 0 ],
					"source": [ "obj-104", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-440", 0 ],
					"source": [ "obj-105", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-106", 1 ],
					"source": [ "obj-440", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-436", 1 ],
					"source": [ "obj-433", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-436", 1 ],
					"source": [ "obj-434", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-439", 1 ],
					"source": [ "obj-433", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-439", 1 ],
					"source": [ "obj-434", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-440", 1 ],
					"source": [ "obj-433", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-440", 1 ],
					"source": [ "obj-434", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-441", 1 ],
					"source": [ "obj-53", 9 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-300", 0 ],
					"source": [ "obj-441", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-442", 0 ],
					"source": [ "obj-300", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-441", 0 ],
					"source": [ "obj-442", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-441", 0 ],
					"source": [ "obj-170", 0 ]
				}
			},
			{
				"patchline": {
					"destination": [ "obj-444", 0 ],
					"source": [ "obj-54", 1 ]
				}
			}
		],
		"parameters": {
			"obj-3": [ "KS Generate", "Generate", 0 ],
			"obj-4": [ "KS Vary", "Vary", 0 ],
			"obj-5": [ "KS Check", "Check", 0 ],
			"obj-7": [ "KS Count", "Count", 0 ],
			"obj-9": [ "KS Steps", "Steps", 0 ],
			"obj-11": [ "KS Seed", "Seed", 0 ],
			"obj-12": [ "KS Random Seed", "Random", 0 ],
			"obj-14": [ "KS Decay", "Decay", 0 ],
			"obj-15": [ "KS Pitch", "Pitch", 0 ],
			"obj-16": [ "KS Click", "Click", 0 ],
			"obj-17": [ "KS Strength", "Strength", 0 ],
			"obj-19": [ "KS Host", "Host", 0 ],
			"obj-21": [ "KS Port", "Port", 0 ],
			"obj-76": [ "KS Set A", "Set A", 0 ],
			"obj-77": [ "KS Morph", "Morph", 0 ],
			"obj-117": [ "KS Map X", "Map X", 0 ],
			"obj-119": [ "KS Map Y", "Map Y", 0 ],
			"obj-120": [ "KS Spread", "Spread", 0 ],
			"obj-121": [ "KS Near", "Near", 0 ],
			"obj-122": [ "KS Locate", "Locate", 0 ],
			"obj-400": [ "KS Kit", "Kit", 0 ],
			"obj-402": [ "KS Layers", "Layers", 0 ],
			"obj-404": [ "KS Robins", "Robins", 0 ],
			"obj-406": [ "KS Note", "Note", 0 ]
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
			"amxdtype": 1835887981,
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
