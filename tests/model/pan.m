#define rand	pan_rand
#define pthread_equal(a,b)	((a)==(b))
#if defined(HAS_CODE) && defined(VERBOSE)
	#ifdef BFS_PAR
		bfs_printf("Pr: %d Tr: %d\n", II, t->forw);
	#else
		cpu_printf("Pr: %d Tr: %d\n", II, t->forw);
	#endif
#endif
	switch (t->forw) {
	default: Uerror("bad forward move");
	case 0:	/* if without executable clauses */
		continue;
	case 1: /* generic 'goto' or 'skip' */
		IfNotBlocked
		_m = 3; goto P999;
	case 2: /* generic 'else' */
		IfNotBlocked
		if (trpt->o_pm&1) continue;
		_m = 3; goto P999;

		 /* PROC :init: */
	case 3: // STATE 1 - fifo_consumers.pml:160 - [k = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[3][1] = 1;
		(trpt+1)->bup.oval = ((int)((P3 *)_this)->k);
		((P3 *)_this)->k = 0;
#ifdef VAR_RANGES
		logval(":init::k", ((int)((P3 *)_this)->k));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 4: // STATE 2 - fifo_consumers.pml:162 - [((k<2))] (0:0:0 - 1)
		IfNotBlocked
		reached[3][2] = 1;
		if (!((((int)((P3 *)_this)->k)<2)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 5: // STATE 3 - fifo_consumers.pml:162 - [(run Producer())] (0:0:0 - 1)
		IfNotBlocked
		reached[3][3] = 1;
		if (!(addproc(II, 1, 0, 0)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 6: // STATE 4 - fifo_consumers.pml:162 - [k = (k+1)] (0:0:1 - 1)
		IfNotBlocked
		reached[3][4] = 1;
		(trpt+1)->bup.oval = ((int)((P3 *)_this)->k);
		((P3 *)_this)->k = (((int)((P3 *)_this)->k)+1);
#ifdef VAR_RANGES
		logval(":init::k", ((int)((P3 *)_this)->k));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 7: // STATE 10 - fifo_consumers.pml:165 - [k = 0] (0:16:1 - 3)
		IfNotBlocked
		reached[3][10] = 1;
		(trpt+1)->bup.oval = ((int)((P3 *)_this)->k);
		((P3 *)_this)->k = 0;
#ifdef VAR_RANGES
		logval(":init::k", ((int)((P3 *)_this)->k));
#endif
		;
		/* merge: .(goto)(0, 17, 16) */
		reached[3][17] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 8: // STATE 11 - fifo_consumers.pml:167 - [((k<3))] (0:0:0 - 1)
		IfNotBlocked
		reached[3][11] = 1;
		if (!((((int)((P3 *)_this)->k)<3)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 9: // STATE 12 - fifo_consumers.pml:167 - [(run Consumer(k))] (0:0:0 - 1)
		IfNotBlocked
		reached[3][12] = 1;
		if (!(addproc(II, 1, 1, ((int)((P3 *)_this)->k))))
			continue;
		_m = 3; goto P999; /* 0 */
	case 10: // STATE 13 - fifo_consumers.pml:167 - [k = (k+1)] (0:0:1 - 1)
		IfNotBlocked
		reached[3][13] = 1;
		(trpt+1)->bup.oval = ((int)((P3 *)_this)->k);
		((P3 *)_this)->k = (((int)((P3 *)_this)->k)+1);
#ifdef VAR_RANGES
		logval(":init::k", ((int)((P3 *)_this)->k));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 11: // STATE 19 - fifo_consumers.pml:170 - [(run Closer())] (0:0:0 - 1)
		IfNotBlocked
		reached[3][19] = 1;
		if (!(addproc(II, 1, 2, 0)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 12: // STATE 21 - fifo_consumers.pml:172 - [((_nr_pr==1))] (0:0:0 - 1)
		IfNotBlocked
		reached[3][21] = 1;
		if (!((((int)now._nr_pr)==1)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 13: // STATE 22 - fifo_consumers.pml:173 - [assert((delivered==real_published))] (0:0:0 - 1)
		IfNotBlocked
		reached[3][22] = 1;
		spin_assert((((int)now.delivered)==((int)now.real_published)), "(delivered==real_published)", II, tt, t);
		_m = 3; goto P999; /* 0 */
	case 14: // STATE 23 - fifo_consumers.pml:174 - [-end-] (0:0:0 - 1)
		IfNotBlocked
		reached[3][23] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */

		 /* PROC Closer */
	case 15: // STATE 1 - fifo_consumers.pml:152 - [closed = 1] (0:0:1 - 1)
		IfNotBlocked
		reached[2][1] = 1;
		(trpt+1)->bup.oval = ((int)now.closed);
		now.closed = 1;
#ifdef VAR_RANGES
		logval("closed", ((int)now.closed));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 16: // STATE 2 - fifo_consumers.pml:57 - [i = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[2][2] = 1;
		(trpt+1)->bup.oval = ((int)((P2 *)_this)->i);
		((P2 *)_this)->i = 0;
#ifdef VAR_RANGES
		logval("Closer:i", ((int)((P2 *)_this)->i));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 17: // STATE 3 - fifo_consumers.pml:59 - [((i<3))] (0:0:0 - 1)
		IfNotBlocked
		reached[2][3] = 1;
		if (!((((int)((P2 *)_this)->i)<3)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 18: // STATE 4 - fifo_consumers.pml:59 - [(reg[i])] (13:0:3 - 1)
		IfNotBlocked
		reached[2][4] = 1;
		if (!(((int)now.reg[ Index(((int)((P2 *)_this)->i), 3) ])))
			continue;
		/* merge: reg[i] = 0(13, 5, 13) */
		reached[2][5] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.reg[ Index(((int)((P2 *)_this)->i), 3) ]);
		now.reg[ Index(((P2 *)_this)->i, 3) ] = 0;
#ifdef VAR_RANGES
		logval("reg[Closer:i]", ((int)now.reg[ Index(((int)((P2 *)_this)->i), 3) ]));
#endif
		;
		/* merge: woken[i] = 1(13, 6, 13) */
		reached[2][6] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.woken[ Index(((int)((P2 *)_this)->i), 3) ]);
		now.woken[ Index(((P2 *)_this)->i, 3) ] = 1;
#ifdef VAR_RANGES
		logval("woken[Closer:i]", ((int)now.woken[ Index(((int)((P2 *)_this)->i), 3) ]));
#endif
		;
		/* merge: .(goto)(13, 9, 13) */
		reached[2][9] = 1;
		;
		/* merge: i = (i+1)(13, 10, 13) */
		reached[2][10] = 1;
		(trpt+1)->bup.ovals[2] = ((int)((P2 *)_this)->i);
		((P2 *)_this)->i = (((int)((P2 *)_this)->i)+1);
#ifdef VAR_RANGES
		logval("Closer:i", ((int)((P2 *)_this)->i));
#endif
		;
		/* merge: .(goto)(0, 14, 13) */
		reached[2][14] = 1;
		;
		_m = 3; goto P999; /* 5 */
	case 19: // STATE 10 - fifo_consumers.pml:59 - [i = (i+1)] (0:13:1 - 3)
		IfNotBlocked
		reached[2][10] = 1;
		(trpt+1)->bup.oval = ((int)((P2 *)_this)->i);
		((P2 *)_this)->i = (((int)((P2 *)_this)->i)+1);
#ifdef VAR_RANGES
		logval("Closer:i", ((int)((P2 *)_this)->i));
#endif
		;
		/* merge: .(goto)(0, 14, 13) */
		reached[2][14] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 20: // STATE 18 - fifo_consumers.pml:154 - [-end-] (0:0:0 - 1)
		IfNotBlocked
		reached[2][18] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */

		 /* PROC Consumer */
	case 21: // STATE 1 - fifo_consumers.pml:105 - [((c_head<p_tail))] (16:0:3 - 1)
		IfNotBlocked
		reached[1][1] = 1;
		if (!((((int)now.c_head)<((int)now.p_tail))))
			continue;
		/* merge: t = c_head(16, 2, 16) */
		reached[1][2] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)((P1 *)_this)->t);
		((P1 *)_this)->t = ((int)now.c_head);
#ifdef VAR_RANGES
		logval("Consumer:t", ((int)((P1 *)_this)->t));
#endif
		;
		/* merge: c_head = (c_head+1)(16, 3, 16) */
		reached[1][3] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.c_head);
		now.c_head = (((int)now.c_head)+1);
#ifdef VAR_RANGES
		logval("c_head", ((int)now.c_head));
#endif
		;
		/* merge: got = 1(16, 4, 16) */
		reached[1][4] = 1;
		(trpt+1)->bup.ovals[2] = ((int)((P1 *)_this)->got);
		((P1 *)_this)->got = 1;
#ifdef VAR_RANGES
		logval("Consumer:got", ((int)((P1 *)_this)->got));
#endif
		;
		/* merge: .(goto)(16, 8, 16) */
		reached[1][8] = 1;
		;
		_m = 3; goto P999; /* 4 */
	case 22: // STATE 8 - fifo_consumers.pml:108 - [.(goto)] (0:16:0 - 2)
		IfNotBlocked
		reached[1][8] = 1;
		;
		_m = 3; goto P999; /* 0 */
	case 23: // STATE 6 - fifo_consumers.pml:106 - [got = 0] (0:16:1 - 1)
		IfNotBlocked
		reached[1][6] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->got);
		((P1 *)_this)->got = 0;
#ifdef VAR_RANGES
		logval("Consumer:got", ((int)((P1 *)_this)->got));
#endif
		;
		/* merge: .(goto)(16, 8, 16) */
		reached[1][8] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 24: // STATE 10 - fifo_consumers.pml:110 - [((got&&tomb[t]))] (0:0:1 - 1)
		IfNotBlocked
		reached[1][10] = 1;
		if (!((((int)((P1 *)_this)->got)&&((int)now.tomb[ Index(((int)((P1 *)_this)->t), 2) ]))))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: got */  (trpt+1)->bup.oval = ((P1 *)_this)->got;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->got = 0;
		_m = 3; goto P999; /* 0 */
	case 25: // STATE 12 - fifo_consumers.pml:111 - [((got&&!(tomb[t])))] (0:0:1 - 1)
		IfNotBlocked
		reached[1][12] = 1;
		if (!((((int)((P1 *)_this)->got)&& !(((int)now.tomb[ Index(((int)((P1 *)_this)->t), 2) ])))))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: got */  (trpt+1)->bup.oval = ((P1 *)_this)->got;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->got = 0;
		_m = 3; goto P999; /* 0 */
	case 26: // STATE 13 - fifo_consumers.pml:111 - [delivered = (delivered+1)] (0:0:1 - 1)
		IfNotBlocked
		reached[1][13] = 1;
		(trpt+1)->bup.oval = ((int)now.delivered);
		now.delivered = (((int)now.delivered)+1);
#ifdef VAR_RANGES
		logval("delivered", ((int)now.delivered));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 27: // STATE 18 - fifo_consumers.pml:116 - [cl = closed] (0:0:1 - 2)
		IfNotBlocked
		reached[1][18] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->cl);
		((P1 *)_this)->cl = ((int)now.closed);
#ifdef VAR_RANGES
		logval("Consumer:cl", ((int)((P1 *)_this)->cl));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 28: // STATE 19 - fifo_consumers.pml:116 - [a = p_head] (0:0:1 - 1)
		IfNotBlocked
		reached[1][19] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->a);
		((P1 *)_this)->a = ((int)now.p_head);
#ifdef VAR_RANGES
		logval("Consumer:a", ((int)((P1 *)_this)->a));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 29: // STATE 20 - fifo_consumers.pml:116 - [b = p_tail] (0:0:1 - 1)
		IfNotBlocked
		reached[1][20] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->b);
		((P1 *)_this)->b = ((int)now.p_tail);
#ifdef VAR_RANGES
		logval("Consumer:b", ((int)((P1 *)_this)->b));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 30: // STATE 21 - fifo_consumers.pml:118 - [((cl&&(a==b)))] (0:0:2 - 1)
		IfNotBlocked
		reached[1][21] = 1;
		if (!((((int)((P1 *)_this)->cl)&&(((int)((P1 *)_this)->a)==((int)((P1 *)_this)->b)))))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: cl */  (trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((P1 *)_this)->cl;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->cl = 0;
		if (TstOnly) return 1; /* TT */
		/* dead 1: a */  (trpt+1)->bup.ovals[1] = ((P1 *)_this)->a;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->a = 0;
		_m = 3; goto P999; /* 0 */
	case 31: // STATE 22 - fifo_consumers.pml:119 - [c = c_head] (0:0:1 - 1)
		IfNotBlocked
		reached[1][22] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->c);
		((P1 *)_this)->c = ((int)now.c_head);
#ifdef VAR_RANGES
		logval("Consumer:c", ((int)((P1 *)_this)->c));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 32: // STATE 23 - fifo_consumers.pml:121 - [((c<b))] (0:0:2 - 1)
		IfNotBlocked
		reached[1][23] = 1;
		if (!((((int)((P1 *)_this)->c)<((int)((P1 *)_this)->b))))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: c */  (trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((P1 *)_this)->c;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->c = 0;
		if (TstOnly) return 1; /* TT */
		/* dead 1: b */  (trpt+1)->bup.ovals[1] = ((P1 *)_this)->b;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->b = 0;
		_m = 3; goto P999; /* 0 */
	case 33: // STATE 32 - fifo_consumers.pml:127 - [reg[me] = 1] (0:0:1 - 3)
		IfNotBlocked
		reached[1][32] = 1;
		(trpt+1)->bup.oval = ((int)now.reg[ Index(((int)((P1 *)_this)->me), 3) ]);
		now.reg[ Index(((P1 *)_this)->me, 3) ] = 1;
#ifdef VAR_RANGES
		logval("reg[Consumer:me]", ((int)now.reg[ Index(((int)((P1 *)_this)->me), 3) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 34: // STATE 33 - fifo_consumers.pml:128 - [deq_wait = 1] (0:0:1 - 1)
		IfNotBlocked
		reached[1][33] = 1;
		(trpt+1)->bup.oval = ((int)now.deq_wait);
		now.deq_wait = 1;
#ifdef VAR_RANGES
		logval("deq_wait", ((int)now.deq_wait));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 35: // STATE 34 - fifo_consumers.pml:129 - [c = c_head] (0:0:1 - 1)
		IfNotBlocked
		reached[1][34] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->c);
		((P1 *)_this)->c = ((int)now.c_head);
#ifdef VAR_RANGES
		logval("Consumer:c", ((int)((P1 *)_this)->c));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 36: // STATE 35 - fifo_consumers.pml:129 - [b = p_tail] (0:0:1 - 1)
		IfNotBlocked
		reached[1][35] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->b);
		((P1 *)_this)->b = ((int)now.p_tail);
#ifdef VAR_RANGES
		logval("Consumer:b", ((int)((P1 *)_this)->b));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 37: // STATE 36 - fifo_consumers.pml:130 - [cl = closed] (0:0:1 - 1)
		IfNotBlocked
		reached[1][36] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->cl);
		((P1 *)_this)->cl = ((int)now.closed);
#ifdef VAR_RANGES
		logval("Consumer:cl", ((int)((P1 *)_this)->cl));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 38: // STATE 37 - fifo_consumers.pml:130 - [a = p_head] (0:0:1 - 1)
		IfNotBlocked
		reached[1][37] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->a);
		((P1 *)_this)->a = ((int)now.p_head);
#ifdef VAR_RANGES
		logval("Consumer:a", ((int)((P1 *)_this)->a));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 39: // STATE 38 - fifo_consumers.pml:132 - [(((c<b)||(cl&&(a==p_tail))))] (0:0:4 - 1)
		IfNotBlocked
		reached[1][38] = 1;
		if (!(((((int)((P1 *)_this)->c)<((int)((P1 *)_this)->b))||(((int)((P1 *)_this)->cl)&&(((int)((P1 *)_this)->a)==((int)now.p_tail))))))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: c */  (trpt+1)->bup.ovals = grab_ints(4);
		(trpt+1)->bup.ovals[0] = ((P1 *)_this)->c;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->c = 0;
		if (TstOnly) return 1; /* TT */
		/* dead 1: b */  (trpt+1)->bup.ovals[1] = ((P1 *)_this)->b;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->b = 0;
		if (TstOnly) return 1; /* TT */
		/* dead 1: cl */  (trpt+1)->bup.ovals[2] = ((P1 *)_this)->cl;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->cl = 0;
		if (TstOnly) return 1; /* TT */
		/* dead 1: a */  (trpt+1)->bup.ovals[3] = ((P1 *)_this)->a;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->a = 0;
		_m = 3; goto P999; /* 0 */
	case 40: // STATE 39 - fifo_consumers.pml:135 - [(reg[me])] (9:0:1 - 1)
		IfNotBlocked
		reached[1][39] = 1;
		if (!(((int)now.reg[ Index(((int)((P1 *)_this)->me), 3) ])))
			continue;
		/* merge: reg[me] = 0(9, 40, 9) */
		reached[1][40] = 1;
		(trpt+1)->bup.oval = ((int)now.reg[ Index(((int)((P1 *)_this)->me), 3) ]);
		now.reg[ Index(((P1 *)_this)->me, 3) ] = 0;
#ifdef VAR_RANGES
		logval("reg[Consumer:me]", ((int)now.reg[ Index(((int)((P1 *)_this)->me), 3) ]));
#endif
		;
		/* merge: .(goto)(9, 58, 9) */
		reached[1][58] = 1;
		;
		/* merge: goto loop(0, 60, 9) */
		reached[1][60] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 41: // STATE 58 - fifo_consumers.pml:138 - [.(goto)] (0:9:0 - 2)
		IfNotBlocked
		reached[1][58] = 1;
		;
		/* merge: goto loop(0, 60, 9) */
		reached[1][60] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 42: // STATE 42 - fifo_consumers.pml:136 - [woken[me] = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[1][42] = 1;
		(trpt+1)->bup.oval = ((int)now.woken[ Index(((int)((P1 *)_this)->me), 3) ]);
		now.woken[ Index(((P1 *)_this)->me, 3) ] = 0;
#ifdef VAR_RANGES
		logval("woken[Consumer:me]", ((int)now.woken[ Index(((int)((P1 *)_this)->me), 3) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 43: // STATE 43 - fifo_consumers.pml:45 - [i = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[1][43] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->i);
		((P1 *)_this)->i = 0;
#ifdef VAR_RANGES
		logval("Consumer:i", ((int)((P1 *)_this)->i));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 44: // STATE 44 - fifo_consumers.pml:47 - [(((i<3)&&reg[i]))] (54:0:2 - 1)
		IfNotBlocked
		reached[1][44] = 1;
		if (!(((((int)((P1 *)_this)->i)<3)&&((int)now.reg[ Index(((int)((P1 *)_this)->i), 3) ]))))
			continue;
		/* merge: reg[i] = 0(54, 45, 54) */
		reached[1][45] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)now.reg[ Index(((int)((P1 *)_this)->i), 3) ]);
		now.reg[ Index(((P1 *)_this)->i, 3) ] = 0;
#ifdef VAR_RANGES
		logval("reg[Consumer:i]", ((int)now.reg[ Index(((int)((P1 *)_this)->i), 3) ]));
#endif
		;
		/* merge: woken[i] = 1(54, 46, 54) */
		reached[1][46] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.woken[ Index(((int)((P1 *)_this)->i), 3) ]);
		now.woken[ Index(((P1 *)_this)->i, 3) ] = 1;
#ifdef VAR_RANGES
		logval("woken[Consumer:i]", ((int)now.woken[ Index(((int)((P1 *)_this)->i), 3) ]));
#endif
		;
		/* merge: goto :b2(0, 47, 54) */
		reached[1][47] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 45: // STATE 48 - fifo_consumers.pml:48 - [(((i<3)&&!(reg[i])))] (52:0:1 - 1)
		IfNotBlocked
		reached[1][48] = 1;
		if (!(((((int)((P1 *)_this)->i)<3)&& !(((int)now.reg[ Index(((int)((P1 *)_this)->i), 3) ])))))
			continue;
		/* merge: i = (i+1)(0, 49, 52) */
		reached[1][49] = 1;
		(trpt+1)->bup.oval = ((int)((P1 *)_this)->i);
		((P1 *)_this)->i = (((int)((P1 *)_this)->i)+1);
#ifdef VAR_RANGES
		logval("Consumer:i", ((int)((P1 *)_this)->i));
#endif
		;
		/* merge: .(goto)(0, 53, 52) */
		reached[1][53] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 46: // STATE 50 - fifo_consumers.pml:49 - [((i>=3))] (0:0:1 - 1)
		IfNotBlocked
		reached[1][50] = 1;
		if (!((((int)((P1 *)_this)->i)>=3)))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: i */  (trpt+1)->bup.oval = ((P1 *)_this)->i;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P1 *)_this)->i = 0;
		_m = 3; goto P999; /* 0 */
	case 47: // STATE 64 - fifo_consumers.pml:142 - [(woken[me])] (0:0:0 - 2)
		IfNotBlocked
		reached[1][64] = 1;
		if (!(((int)now.woken[ Index(((int)((P1 *)_this)->me), 3) ])))
			continue;
		_m = 3; goto P999; /* 0 */
	case 48: // STATE 65 - fifo_consumers.pml:143 - [woken[me] = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[1][65] = 1;
		(trpt+1)->bup.oval = ((int)now.woken[ Index(((int)((P1 *)_this)->me), 3) ]);
		now.woken[ Index(((P1 *)_this)->me, 3) ] = 0;
#ifdef VAR_RANGES
		logval("woken[Consumer:me]", ((int)now.woken[ Index(((int)((P1 *)_this)->me), 3) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 49: // STATE 68 - fifo_consumers.pml:147 - [-end-] (0:0:0 - 1)
		IfNotBlocked
		reached[1][68] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */

		 /* PROC Producer */
	case 50: // STATE 1 - fifo_consumers.pml:82 - [(closed)] (0:0:0 - 1)
		IfNotBlocked
		reached[0][1] = 1;
		if (!(((int)now.closed)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 51: // STATE 6 - fifo_consumers.pml:85 - [t = p_head] (0:13:2 - 1)
		IfNotBlocked
		reached[0][6] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)((P0 *)_this)->t);
		((P0 *)_this)->t = ((int)now.p_head);
#ifdef VAR_RANGES
		logval("Producer:t", ((int)((P0 *)_this)->t));
#endif
		;
		/* merge: p_head = (p_head+1)(13, 7, 13) */
		reached[0][7] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.p_head);
		now.p_head = (((int)now.p_head)+1);
#ifdef VAR_RANGES
		logval("p_head", ((int)now.p_head));
#endif
		;
		_m = 3; goto P999; /* 1 */
	case 52: // STATE 9 - fifo_consumers.pml:87 - [(closed)] (0:0:0 - 1)
		IfNotBlocked
		reached[0][9] = 1;
		if (!(((int)now.closed)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 53: // STATE 10 - fifo_consumers.pml:87 - [tomb[t] = 1] (0:0:1 - 1)
		IfNotBlocked
		reached[0][10] = 1;
		(trpt+1)->bup.oval = ((int)now.tomb[ Index(((int)((P0 *)_this)->t), 2) ]);
		now.tomb[ Index(((P0 *)_this)->t, 2) ] = 1;
#ifdef VAR_RANGES
		logval("tomb[Producer:t]", ((int)now.tomb[ Index(((int)((P0 *)_this)->t), 2) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 54: // STATE 12 - fifo_consumers.pml:88 - [tomb[t] = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[0][12] = 1;
		(trpt+1)->bup.oval = ((int)now.tomb[ Index(((int)((P0 *)_this)->t), 2) ]);
		now.tomb[ Index(((P0 *)_this)->t, 2) ] = 0;
#ifdef VAR_RANGES
		logval("tomb[Producer:t]", ((int)now.tomb[ Index(((int)((P0 *)_this)->t), 2) ]));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 55: // STATE 15 - fifo_consumers.pml:90 - [((p_tail==t))] (0:0:0 - 3)
		IfNotBlocked
		reached[0][15] = 1;
		if (!((((int)now.p_tail)==((int)((P0 *)_this)->t))))
			continue;
		_m = 3; goto P999; /* 0 */
	case 56: // STATE 16 - fifo_consumers.pml:91 - [p_tail = (p_tail+1)] (0:0:1 - 1)
		IfNotBlocked
		reached[0][16] = 1;
		(trpt+1)->bup.oval = ((int)now.p_tail);
		now.p_tail = (((int)now.p_tail)+1);
#ifdef VAR_RANGES
		logval("p_tail", ((int)now.p_tail));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 57: // STATE 17 - fifo_consumers.pml:91 - [(!(tomb[t]))] (61:0:2 - 1)
		IfNotBlocked
		reached[0][17] = 1;
		if (!( !(((int)now.tomb[ Index(((int)((P0 *)_this)->t), 2) ]))))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: t */  (trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((P0 *)_this)->t;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P0 *)_this)->t = 0;
		/* merge: real_published = (real_published+1)(61, 18, 61) */
		reached[0][18] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.real_published);
		now.real_published = (((int)now.real_published)+1);
#ifdef VAR_RANGES
		logval("real_published", ((int)now.real_published));
#endif
		;
		/* merge: .(goto)(61, 21, 61) */
		reached[0][21] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 58: // STATE 21 - fifo_consumers.pml:91 - [.(goto)] (0:61:0 - 2)
		IfNotBlocked
		reached[0][21] = 1;
		;
		_m = 3; goto P999; /* 0 */
	case 59: // STATE 23 - fifo_consumers.pml:69 - [(deq_wait)] (0:0:0 - 1)
		IfNotBlocked
		reached[0][23] = 1;
		if (!(((int)now.deq_wait)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 60: // STATE 24 - fifo_consumers.pml:71 - [(closed)] (0:0:0 - 1)
		IfNotBlocked
		reached[0][24] = 1;
		if (!(((int)now.closed)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 61: // STATE 25 - fifo_consumers.pml:57 - [i = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[0][25] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->i);
		((P0 *)_this)->i = 0;
#ifdef VAR_RANGES
		logval("Producer:i", ((int)((P0 *)_this)->i));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 62: // STATE 26 - fifo_consumers.pml:59 - [((i<3))] (0:0:0 - 1)
		IfNotBlocked
		reached[0][26] = 1;
		if (!((((int)((P0 *)_this)->i)<3)))
			continue;
		_m = 3; goto P999; /* 0 */
	case 63: // STATE 27 - fifo_consumers.pml:59 - [(reg[i])] (36:0:3 - 1)
		IfNotBlocked
		reached[0][27] = 1;
		if (!(((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ])))
			continue;
		/* merge: reg[i] = 0(36, 28, 36) */
		reached[0][28] = 1;
		(trpt+1)->bup.ovals = grab_ints(3);
		(trpt+1)->bup.ovals[0] = ((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ]);
		now.reg[ Index(((P0 *)_this)->i, 3) ] = 0;
#ifdef VAR_RANGES
		logval("reg[Producer:i]", ((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ]));
#endif
		;
		/* merge: woken[i] = 1(36, 29, 36) */
		reached[0][29] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.woken[ Index(((int)((P0 *)_this)->i), 3) ]);
		now.woken[ Index(((P0 *)_this)->i, 3) ] = 1;
#ifdef VAR_RANGES
		logval("woken[Producer:i]", ((int)now.woken[ Index(((int)((P0 *)_this)->i), 3) ]));
#endif
		;
		/* merge: .(goto)(36, 32, 36) */
		reached[0][32] = 1;
		;
		/* merge: i = (i+1)(36, 33, 36) */
		reached[0][33] = 1;
		(trpt+1)->bup.ovals[2] = ((int)((P0 *)_this)->i);
		((P0 *)_this)->i = (((int)((P0 *)_this)->i)+1);
#ifdef VAR_RANGES
		logval("Producer:i", ((int)((P0 *)_this)->i));
#endif
		;
		/* merge: .(goto)(0, 37, 36) */
		reached[0][37] = 1;
		;
		_m = 3; goto P999; /* 5 */
	case 64: // STATE 33 - fifo_consumers.pml:59 - [i = (i+1)] (0:36:1 - 3)
		IfNotBlocked
		reached[0][33] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->i);
		((P0 *)_this)->i = (((int)((P0 *)_this)->i)+1);
#ifdef VAR_RANGES
		logval("Producer:i", ((int)((P0 *)_this)->i));
#endif
		;
		/* merge: .(goto)(0, 37, 36) */
		reached[0][37] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 65: // STATE 42 - fifo_consumers.pml:45 - [i = 0] (0:0:1 - 1)
		IfNotBlocked
		reached[0][42] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->i);
		((P0 *)_this)->i = 0;
#ifdef VAR_RANGES
		logval("Producer:i", ((int)((P0 *)_this)->i));
#endif
		;
		_m = 3; goto P999; /* 0 */
	case 66: // STATE 43 - fifo_consumers.pml:47 - [(((i<3)&&reg[i]))] (53:0:2 - 1)
		IfNotBlocked
		reached[0][43] = 1;
		if (!(((((int)((P0 *)_this)->i)<3)&&((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ]))))
			continue;
		/* merge: reg[i] = 0(53, 44, 53) */
		reached[0][44] = 1;
		(trpt+1)->bup.ovals = grab_ints(2);
		(trpt+1)->bup.ovals[0] = ((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ]);
		now.reg[ Index(((P0 *)_this)->i, 3) ] = 0;
#ifdef VAR_RANGES
		logval("reg[Producer:i]", ((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ]));
#endif
		;
		/* merge: woken[i] = 1(53, 45, 53) */
		reached[0][45] = 1;
		(trpt+1)->bup.ovals[1] = ((int)now.woken[ Index(((int)((P0 *)_this)->i), 3) ]);
		now.woken[ Index(((P0 *)_this)->i, 3) ] = 1;
#ifdef VAR_RANGES
		logval("woken[Producer:i]", ((int)now.woken[ Index(((int)((P0 *)_this)->i), 3) ]));
#endif
		;
		/* merge: goto :b1(53, 46, 53) */
		reached[0][46] = 1;
		;
		_m = 3; goto P999; /* 3 */
	case 67: // STATE 47 - fifo_consumers.pml:48 - [(((i<3)&&!(reg[i])))] (51:0:1 - 1)
		IfNotBlocked
		reached[0][47] = 1;
		if (!(((((int)((P0 *)_this)->i)<3)&& !(((int)now.reg[ Index(((int)((P0 *)_this)->i), 3) ])))))
			continue;
		/* merge: i = (i+1)(0, 48, 51) */
		reached[0][48] = 1;
		(trpt+1)->bup.oval = ((int)((P0 *)_this)->i);
		((P0 *)_this)->i = (((int)((P0 *)_this)->i)+1);
#ifdef VAR_RANGES
		logval("Producer:i", ((int)((P0 *)_this)->i));
#endif
		;
		/* merge: .(goto)(0, 52, 51) */
		reached[0][52] = 1;
		;
		_m = 3; goto P999; /* 2 */
	case 68: // STATE 49 - fifo_consumers.pml:49 - [((i>=3))] (53:0:1 - 1)
		IfNotBlocked
		reached[0][49] = 1;
		if (!((((int)((P0 *)_this)->i)>=3)))
			continue;
		if (TstOnly) return 1; /* TT */
		/* dead 1: i */  (trpt+1)->bup.oval = ((P0 *)_this)->i;
#ifdef HAS_CODE
		if (!readtrail)
#endif
			((P0 *)_this)->i = 0;
		/* merge: goto :b1(0, 50, 53) */
		reached[0][50] = 1;
		;
		_m = 3; goto P999; /* 1 */
	case 69: // STATE 63 - fifo_consumers.pml:95 - [-end-] (0:0:0 - 1)
		IfNotBlocked
		reached[0][63] = 1;
		if (!delproc(1, II)) continue;
		_m = 3; goto P999; /* 0 */
	case  _T5:	/* np_ */
		if (!((!(trpt->o_pm&4) && !(trpt->tau&128))))
			continue;
		/* else fall through */
	case  _T2:	/* true */
		_m = 3; goto P999;
#undef rand
	}

